import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { reportFromText, targetOfReportFile } from "../../extension/src/reportFile";
import {
  ERROR_CODES,
  cancelledTargets,
  failureKind,
  outsideWorkspacePaths,
  savedSpec,
  startedTarget,
} from "../../extension/src/serverReplies";
import { loadReport } from "./fixtures";

describe("server replies", () => {
  it("failureKind: already running, a server message, or unexpected", () => {
    assert.equal(failureKind(-32002), "already-running");
    assert.equal(failureKind(-32602), "server-message");
    assert.equal(failureKind(-32803), "server-message");
    for (const code of [undefined, -32603, -32600, 0, 1]) {
      assert.equal(failureKind(code), "unexpected", String(code));
    }
  });

  it("outsideWorkspacePaths: only a request-failed error whose data lists the paths", () => {
    const data = { kind: "outside-workspace", target: "t", paths: ["/opt/m.py", "/opt/s.py"] };
    assert.deepEqual(outsideWorkspacePaths(ERROR_CODES.requestFailed, data), ["/opt/m.py", "/opt/s.py"]);
    assert.deepEqual(outsideWorkspacePaths(ERROR_CODES.requestFailed, { kind: "outside-workspace", paths: [] }), []);
    assert.equal(outsideWorkspacePaths(ERROR_CODES.invalidParams, data), undefined, "another code");
    assert.equal(outsideWorkspacePaths(undefined, data), undefined, "not a JSON-RPC error");
    assert.equal(outsideWorkspacePaths(ERROR_CODES.requestFailed, { ...data, kind: "not-passed" }), undefined, "another refusal");
    assert.equal(outsideWorkspacePaths(ERROR_CODES.requestFailed, { kind: "outside-workspace" }), undefined, "no paths");
    assert.equal(outsideWorkspacePaths(ERROR_CODES.requestFailed, { kind: "outside-workspace", paths: ["/a", 3] }), undefined, "a path that is no string");
    assert.equal(outsideWorkspacePaths(ERROR_CODES.requestFailed, { kind: "outside-workspace", paths: "/a" }), undefined, "paths not a list");
    assert.equal(outsideWorkspacePaths(ERROR_CODES.requestFailed, null), undefined);
    assert.equal(outsideWorkspacePaths(ERROR_CODES.requestFailed, ["/a"]), undefined);
  });

  it("startedTarget: the server's name for the target, else the one asked for", () => {
    assert.equal(startedTarget({ target: "helper_model" }, "file:///w/m.py"), "helper_model");
    for (const result of [null, undefined, {}, { target: 3 }, "helper_model", []]) {
      assert.equal(startedTarget(result, "asked"), "asked", JSON.stringify(result));
    }
  });

  it("cancelledTargets: the list, as strings, or none", () => {
    assert.deepEqual(cancelledTargets({ cancelled: ["a", "b"] }), ["a", "b"]);
    assert.deepEqual(cancelledTargets({ cancelled: [] }), []);
    assert.deepEqual(cancelledTargets({ cancelled: [1] }), ["1"]);
    for (const result of [null, undefined, {}, { cancelled: "a" }, ["a"]]) {
      assert.deepEqual(cancelledTargets(result), [], JSON.stringify(result));
    }
  });

  it("savedSpec: the file, and whether it already held the spec", () => {
    assert.deepEqual(savedSpec({ saved: "file:///w/m.distspec.json" }), { uri: "file:///w/m.distspec.json", unchanged: false });
    assert.deepEqual(savedSpec({ saved: "file:///w/m.distspec.json", unchanged: true }), { uri: "file:///w/m.distspec.json", unchanged: true });
    assert.deepEqual(savedSpec({ saved: "file:///w/m.distspec.json", unchanged: "yes" }), { uri: "file:///w/m.distspec.json", unchanged: false });
    for (const result of [null, undefined, {}, { saved: "" }, { saved: 1 }, "file:///w/x"]) {
      assert.equal(savedSpec(result), undefined, JSON.stringify(result));
    }
  });
});

describe("report files", () => {
  it("targetOfReportFile strips .json and the report suffixes", () => {
    assert.equal(targetOfReportFile("/w/helper_model.distcheck-report.json"), "helper_model");
    assert.equal(targetOfReportFile("/w/helper_model.report.json"), "helper_model");
    assert.equal(targetOfReportFile("/w/helper_model.JSON"), "helper_model");
    assert.equal(targetOfReportFile("C:\\w\\m.distcheck-report.json"), "m");
    assert.equal(targetOfReportFile("plain"), "plain");
  });

  it("reportFromText: a bare report, wrapped; a report message as it is; anything else not", () => {
    const report = loadReport("worker_error");
    const wrapped = reportFromText(JSON.stringify(report), "/w/buggy.distcheck-report.json", "/w/buggy.distcheck-report.json");
    assert.deepEqual(wrapped, { target: "buggy", specUri: null, report, notice: "read from /w/buggy.distcheck-report.json" });
    const message = { target: "t", specUri: "file:///w/t.distspec.json", report, notice: null };
    assert.deepEqual(reportFromText(JSON.stringify(message), "/w/anything.json", "/w/anything.json"), message);
    for (const text of ["", "{", "null", "[]", '{"attempts": []}', JSON.stringify({ ...report, attempts: {} }), '"report"']) {
      assert.equal(reportFromText(text, "/w/x.json", "/w/x.json"), undefined, text);
    }
  });
});
