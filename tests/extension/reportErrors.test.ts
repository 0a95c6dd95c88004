// Every report the engine can produce renders: one report of every setup-error and worker-error kind
// (written by tests/extension/fixtures/regenerate_errors.py as the daemon gets it) goes through the
// schema's types and the panel's renderer with no "malformed" banner and no error line, shows the
// error's type and message, and says whose failure it is (a rank's, or the reference run's / parent's).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import Ajv2020 from "ajv/dist/2020";

import { looksLikeReportMessage } from "../../extension/src/report";
import { reportFromText } from "../../extension/src/reportFile";
import { escapeHtml, renderReportHtml } from "../../extension/src/reportHtml";
import { ERROR_FIXTURES, loadReport, message } from "./fixtures";

const OPTIONS = { nonce: "N0NCE", cspSource: "vscode-webview://abc", scriptUri: "vscode-webview://abc/report.js" };
const SCHEMA_FILE = join(__dirname, "..", "..", "..", "extension", "schemas", "report.schema.json");
const FIXTURE_DIR = join(__dirname, "..", "fixtures");

/** The generated report schema (`python -m distcheck.report`), the one the Python side checks reports with. */
const validReport = new Ajv2020({ allErrors: true, strict: false }).compile(JSON.parse(readFileSync(SCHEMA_FILE, "utf8")) as object);

interface ErrorJson {
  type: string;
  message: string;
  rank: number | null;
  phase: string;
}

function errorOf(name: string): ErrorJson {
  const report = loadReport(name);
  const error = report.attempts[0]?.error as ErrorJson | null | undefined;
  assert.ok(error, `${name}: its first attempt has no error`);
  return error;
}

/** What each fixture must be: the error's type, whose it is (null: the reference run's or the parent's) and its phase. */
const EXPECTED: Record<(typeof ERROR_FIXTURES)[number], { type: string; rank: number | null; phase: string }> = {
  error_missing_package: { type: "ConfigError", rank: null, phase: "setup" },
  error_missing_package_factory: { type: "ModuleNotFoundError", rank: -1, phase: "reference" },
  error_syntax: { type: "ConfigError", rank: null, phase: "setup" },
  error_bad_sample: { type: "ConfigError", rank: null, phase: "setup" },
  error_reference: { type: "ValueError", rank: -1, phase: "reference" },
  error_timeout: { type: "RankStuck", rank: 1, phase: "forward" },
  error_oom: { type: "OutOfMemoryError", rank: 1, phase: "forward" },
  error_rank_exit: { type: "RankExited", rank: 1, phase: "forward" },
};

describe("report panel: every setup-error and worker-error kind", () => {
  for (const name of ERROR_FIXTURES) {
    describe(name, () => {
      const html = renderReportHtml(message(name), OPTIONS);
      const error = errorOf(name);

      it("is the kind the regenerator wrote", () => {
        const expected = EXPECTED[name];
        assert.deepEqual({ type: error.type, rank: error.rank, phase: error.phase }, expected);
        assert.equal(loadReport(name).verdict, "error");
      });

      it("passes the report schema and the panel's report checks", () => {
        const ok = validReport(loadReport(name));
        assert.ok(ok, `${name}: ${JSON.stringify(validReport.errors?.slice(0, 5))}`);
        assert.ok(looksLikeReportMessage(message(name)), `${name}: not taken for a distcheck/report message`);
        const text = readFileSync(join(FIXTURE_DIR, `${name}.json`), "utf8");
        assert.ok(reportFromText(text, `${name}.json`, `${name}.json`), `${name}: Show report refuses the file`);
      });

      it("renders with no malformed banner and no error line", () => {
        assert.doesNotMatch(html, /id="malformed"/);
        assert.doesNotMatch(html, /Parts of this report are malformed/);
        const lines = [...html.matchAll(/<p class="report-error">([^<]*)<\/p>/g)].map((m) => m[1]);
        assert.deepEqual(lines, [], `${name}: ${lines.join(" | ")}`);
        assert.match(html, /<main data-verdict="error">/);
      });

      it("shows the error's type and message in the worker-error card", () => {
        const card = /<section id="errors">[\s\S]*?<\/section>/.exec(html)?.[0] ?? "";
        assert.ok(card, `${name}: no worker-error section`);
        assert.ok(card.includes(`<h3>${escapeHtml(error.type)} on `), `${name}: the card does not name ${error.type}`);
        assert.ok(card.includes(`<p class="message">${escapeHtml(error.message)}</p>`), `${name}: the card lacks the message`);
        assert.ok(html.includes(escapeHtml(error.message.split("\n")[0] ?? "")), `${name}: the message is not on the page`);
      });

      it("says whose failure it is", () => {
        const heading = /<div class="worker-error">\s*<h3>([\s\S]*?)<\/h3>/.exec(html)?.[1] ?? "";
        if (error.rank === null || error.rank < 0) {
          assert.match(heading, / on reference \/ parent during /, `${name}: ${heading}`);
          assert.doesNotMatch(heading, /rank -?\d/, `${name}: ${heading}`);
        } else {
          assert.match(heading, new RegExp(` on rank ${error.rank} during ${error.phase} `), `${name}: ${heading}`);
        }
      });
    });
  }
});
