import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type TargetInfo } from "../../extension/src/report";
import {
  chooseTarget,
  configLensSpots,
  factoryFunction,
  lensSpots,
  moduleLevelDefs,
  targetPickItems,
} from "../../extension/src/targets";

const WS = "file:///ws";
/** A target as the daemon's `distcheck/targets` returns it (pyproject targets point `uri` at the pyproject). */
const T = (name: string, file: string, extra: Partial<TargetInfo> = {}): TargetInfo => ({
  name,
  factory: `${file}:model_factory`,
  sample: `${file}:sample_batch`,
  source: "pyproject",
  uri: `${WS}/pyproject.toml`,
  line: 10,
  factoryUri: `${WS}/${file}`,
  factoryLine: 3,
  ...extra,
});

describe("chooseTarget", () => {
  it("the only target", () => {
    assert.deepEqual(chooseTarget([T("a", "a.py")], undefined), { kind: "target", name: "a" });
  });

  it("a picker when there are several, the active file's targets first", () => {
    const targets = [T("a", "a.py"), T("b", "b.py"), T("c", "c.py")];
    const choice = chooseTarget(targets, { uri: `${WS}/b.py`, languageId: "python" });
    assert.equal(choice.kind, "pick");
    assert.ok(choice.kind === "pick");
    assert.deepEqual(
      choice.items.map((t) => t.name),
      ["b", "a", "c"],
    );
    assert.equal(choice.preselect, "b");
    const none = chooseTarget(targets, undefined);
    assert.ok(none.kind === "pick" && none.preselect === undefined);
  });

  it("the active Python file when nothing is configured", () => {
    assert.deepEqual(chooseTarget([], { uri: `${WS}/m.py`, languageId: "python" }), { kind: "file", uri: `${WS}/m.py` });
  });

  it("nothing, with a reason, otherwise", () => {
    const choice = chooseTarget([], { uri: `${WS}/x.json`, languageId: "json" });
    assert.equal(choice.kind, "none");
    assert.ok(choice.kind === "none" && choice.reason.includes("[tool.distcheck]"));
    assert.equal(chooseTarget([], undefined).kind, "none");
  });

  it("compares URIs after percent-decoding and drive-letter case", () => {
    const targets = [T("a", "a.py", { factoryUri: "file:///c%3A/ws/my%20model.py" }), T("b", "b.py")];
    const choice = chooseTarget(targets, { uri: "file:///C:/ws/my model.py", languageId: "python" });
    assert.ok(choice.kind === "pick" && choice.preselect === "a");
  });
});

describe("CodeLens spots", () => {
  const text = [
    "import torch",
    "",
    "def helper():",
    "    def model_factory():",
    "        pass",
    "",
    "def model_factory() -> Model:",
    "    return Model()",
    "",
    "def other_factory(n=3):",
    "    pass",
  ].join("\n");

  it("module-level defs only", () => {
    assert.deepEqual(moduleLevelDefs(text, "model_factory"), [6]);
    assert.deepEqual(moduleLevelDefs("async def model_factory():\n", "model_factory"), [0]);
  });

  it("a lens at each configured factory and at a module-level model_factory", () => {
    const targets = [T("cfg", "m.py", { factory: "m.py:other_factory", factoryLine: 99 }), T("elsewhere", "z.py")];
    assert.deepEqual(lensSpots(text, `${WS}/m.py`, targets), [
      { line: 6, arg: `${WS}/m.py`, title: "▶ Validate distribution" },
      { line: 9, arg: "cfg", title: "▶ Validate distribution (cfg)" },
    ]);
  });

  it("one lens when the configured factory is model_factory itself", () => {
    const spots = lensSpots(text, `${WS}/m.py`, [T("cfg", "m.py")]);
    assert.deepEqual(spots, [{ line: 6, arg: "cfg", title: "▶ Validate distribution (cfg)" }]);
  });

  it("falls back to the server's line when the def is not found", () => {
    const spots = lensSpots("x = 1\n", `${WS}/m.py`, [T("cfg", "m.py", { factory: "m.py:gone", factoryLine: 0 })]);
    assert.deepEqual(spots, [{ line: 0, arg: "cfg", title: "▶ Validate distribution (cfg)" }]);
  });

  it("a file target from the server validates the file", () => {
    const spots = lensSpots(text, `${WS}/m.py`, [T("m.py", "m.py", { source: "file", uri: `${WS}/m.py`, line: 6 })]);
    assert.deepEqual(spots, [{ line: 6, arg: `${WS}/m.py`, title: "▶ Validate distribution" }]);
  });

  it("an older server that only sends uri/line for a file target", () => {
    const old: TargetInfo = { name: "m.py", factory: "m.py:model_factory", source: "file", uri: `${WS}/m.py`, line: 6 };
    assert.deepEqual(lensSpots(text, `${WS}/m.py`, [old]), [{ line: 6, arg: `${WS}/m.py`, title: "▶ Validate distribution" }]);
  });

  it("a lens at each target table of pyproject.toml", () => {
    const targets = [T("b", "b.py", { line: 20 }), T("a", "a.py", { line: 12 }), T("f", "f.py", { source: "file", uri: `${WS}/f.py` })];
    assert.deepEqual(configLensSpots(`${WS}/pyproject.toml`, targets), [
      { line: 12, arg: "a", title: "▶ Validate distribution (a)" },
      { line: 20, arg: "b", title: "▶ Validate distribution (b)" },
    ]);
  });

  it("factoryFunction", () => {
    assert.equal(factoryFunction("path/file.py:func"), "func");
    assert.equal(factoryFunction("C:/x/file.py:mod.func"), "func");
    assert.equal(factoryFunction("C:/x/file.py"), undefined);
    assert.equal(factoryFunction(undefined), undefined);
  });
});

describe("target picker rows", () => {
  const onDisk = new Set([`${WS}/specs/a.distspec.json`]);
  const ctx = {
    relative: (u: string): string => u.replace(/^file:\/\/\/ws\//, "").replace(/^\/ws\//, ""),
    exists: (u: string): boolean => onDisk.has(u),
  };

  it("factories are workspace-relative path:function, never absolute", () => {
    const rows = targetPickItems([T("a", "models/a.py"), T("b", "b.py", { factoryUri: null, factory: "/ws/pkg/b.py:make" })], undefined, ctx);
    assert.deepEqual(
      rows.map((r) => r.description),
      ["models/a.py:model_factory", "pkg/b.py:make"],
    );
    for (const r of rows) {
      assert.ok(!r.description.startsWith("/") && !r.description.startsWith("file:"), r.description);
    }
  });

  it("a hostile target name shows escaped, and Validate still gets the name itself", () => {
    const name = "evil\u001b]0;owned\u0007\u202e.py";
    const [row] = targetPickItems([T(name, "evil\u202e.py")], undefined, ctx);
    assert.equal(row?.name, name);
    assert.equal(row?.label, "evil\\x1b]0;owned\\x07\\u202e.py");
    // eslint-disable-next-line no-control-regex -- the check is that no control character is left
    assert.ok(!/[\u0000-\u001f\u202e]/.test(`${row?.label ?? ""}${row?.description ?? ""}`), row?.description);
  });

  it("a relative factory as configured is kept", () => {
    const rows = targetPickItems([T("c", "c.py", { factoryUri: null, factory: "examples/c.py:model_factory" })], undefined, ctx);
    assert.equal(rows[0]?.description, "examples/c.py:model_factory");
  });

  it("a spec file is shown only when it exists, relative to the workspace", () => {
    const rows = targetPickItems(
      [
        T("a", "a.py", { spec: "/ws/specs/a.distspec.json", specUri: `${WS}/specs/a.distspec.json`, specConfigured: true }),
        T("b", "b.py", { spec: "/ws/specs/b.distspec.json", specUri: `${WS}/specs/b.distspec.json`, specConfigured: true }),
        T("c", "c.py", { spec: "/ws/c.distspec.json", specUri: null }),
        T("f", "f.py", { source: "file", uri: `${WS}/f.py`, factoryUri: `${WS}/f.py` }),
      ],
      undefined,
      ctx,
    );
    assert.deepEqual(
      rows.map((r) => r.detail),
      ["spec specs/a.distspec.json", undefined, undefined, "model_factory and sample_batch in this file"],
    );
  });

  it("the preselected target comes first and is picked; the rest keep their order", () => {
    const rows = targetPickItems([T("a", "a.py"), T("b", "b.py"), T("c", "c.py")], "c", ctx);
    assert.deepEqual(
      rows.map((r) => [r.name, r.picked]),
      [
        ["c", true],
        ["a", false],
        ["b", false],
      ],
    );
  });
});
