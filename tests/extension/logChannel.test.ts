import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { type Level, LeveledLines, classifyLine } from "../../extension/src/logChannel";

function sink(): { lines: Array<[Level, string]>; sink: Record<Level, (s: string) => void> } {
  const lines: Array<[Level, string]> = [];
  const at = (level: Level) => (s: string) => {
    lines.push([level, s]);
  };
  return { lines, sink: { trace: at("trace"), debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") } };
}

describe("log levels of the client's lines", () => {
  it("the client's [Name - time] prefix decides the level and is dropped", () => {
    assert.deepEqual(classifyLine("[Warn  - 10:00:01 PM] request refused: unknown target 'x'"), {
      level: "warn",
      text: "request refused: unknown target 'x'",
    });
    assert.deepEqual(classifyLine("[Error - 10:00:01] Server process exited with code 1."), { level: "error", text: "Server process exited with code 1." });
    assert.deepEqual(classifyLine("[Info  - 10:00:01] workspace trusted"), { level: "info", text: "workspace trusted" });
    assert.deepEqual(classifyLine("[Trace - 10:00:01] Sending request 'initialize - (0)'."), { level: "trace", text: "Sending request 'initialize - (0)'." });
    assert.equal(classifyLine("[LSP   - 10:00:01] {}").level, "trace");
    assert.equal(classifyLine("[Error - 10:00:01] Server process exited with code 0.").level, "info", "a clean exit (restart) is no error");
    assert.equal(classifyLine("[Error - 10:00:01] Server process exited with code 1.").level, "error");
  });

  it("Python logging lines on the server's stderr keep their level; other lines the previous one", () => {
    assert.equal(classifyLine("ERROR:pygls.protocol.json_rpc:Failed to handle request").level, "error");
    assert.equal(classifyLine("WARNING:pygls:unknown method").level, "warn");
    assert.equal(classifyLine('  File "x.py", line 3, in f', "error").level, "error");
    assert.equal(classifyLine("plain text").level, "info");
  });
});

describe("LeveledLines", () => {
  it("a refused request is a warning, not an error; its data line stays with it", () => {
    const { lines, sink: s } = sink();
    const out = new LeveledLines("Distcheck", s, "info");
    out.appendLine("[Warn  - 1:00:00] request refused: no target has been validated yet; run Distcheck: Validate first");
    out.appendLine('{"code": -32803}');
    assert.deepEqual(lines, [
      ["warn", "request refused: no target has been validated yet; run Distcheck: Validate first"],
      ["warn", '{"code": -32803}'],
    ]);
  });

  it("stderr chunks are joined into lines; a traceback stays at the level of its logging line", () => {
    const { lines, sink: s } = sink();
    const out = new LeveledLines("Distcheck", s, "info");
    out.append("ERROR:pygls:Failed to han");
    out.append("dle request 3\nTraceback (most recent call last):\n  File \"a.py\", line 1\n");
    out.append("KeyError: 'x'\n");
    out.appendLine("[Info  - 1:00:01] server started");
    assert.deepEqual(lines, [
      ["error", "ERROR:pygls:Failed to handle request 3"],
      ["error", "Traceback (most recent call last):"],
      ["error", '  File "a.py", line 1'],
      ["error", "KeyError: 'x'"],
      ["info", "server started"],
    ]);
  });

  it("a partial chunk before a client line is flushed as its own line; dispose flushes the rest", () => {
    const { lines, sink: s } = sink();
    const out = new LeveledLines("Distcheck", s, "info");
    out.append("WARNING:distcheck:half");
    out.appendLine("[Error - 1:00:02] Connection to server got closed.");
    out.append("tail without newline");
    out.dispose();
    assert.deepEqual(lines, [
      ["warn", "WARNING:distcheck:half"],
      ["error", "Connection to server got closed."],
      ["error", "tail without newline"],
    ]);
  });

  it("the trace channel's unprefixed message bodies are trace", () => {
    const { lines, sink: s } = sink();
    const out = new LeveledLines("Distcheck", s, "trace");
    out.appendLine('Params: {"processId": 1}');
    assert.deepEqual(lines, [["trace", 'Params: {"processId": 1}']]);
  });
});
