import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { helperFixAction, locatedModule } from "../../extension/src/serverReplies";

describe("server request replies", () => {
  it("locatedModule: a Location's file and start, else undefined (not found or not a location)", () => {
    const range = { start: { line: 12, character: 6 }, end: { line: 12, character: 27 } };
    assert.deepEqual(locatedModule({ uri: "file:///w/readout.py", range }), { uri: "file:///w/readout.py", line: 12, character: 6 });
    for (const bad of [
      null,
      undefined,
      "file:///w/readout.py",
      { uri: "file:///w/readout.py" },
      { uri: "", range },
      { uri: 5, range },
      { uri: "file:///w/r.py", range: { start: { line: -1, character: 0 } } },
      { uri: "file:///w/r.py", range: { start: { line: 1.5, character: 0 } } },
      { uri: "file:///w/r.py", range: { start: { line: "1", character: 0 } } },
      [{ uri: "file:///w/r.py", range }],
    ]) {
      assert.equal(locatedModule(bad), undefined, JSON.stringify(bad));
    }
  });

  it("helperFixAction: a resolved code action (title and edit), else undefined", () => {
    const edit = { documentChanges: [] };
    assert.deepEqual(helperFixAction({ title: "Declare a.b as a reduction adapter in s.json", kind: "quickfix", edit }), {
      title: "Declare a.b as a reduction adapter in s.json",
      edit,
    });
    for (const bad of [null, undefined, { title: "x" }, { title: "x", edit: "e" }, { edit }, { title: 3, edit }, "x"]) {
      assert.equal(helperFixAction(bad), undefined, JSON.stringify(bad));
    }
  });
});
