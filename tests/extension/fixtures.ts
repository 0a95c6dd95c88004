// Loads the report fixtures (real reports written by `validate_on_cpu`, see README.md here).
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { type ReportJson, type ReportMessage } from "../../extension/src/report";

const DIR = join(__dirname, "..", "fixtures");

export function loadReport(name: string): ReportJson {
  return JSON.parse(readFileSync(join(DIR, `${name}.json`), "utf8")) as ReportJson;
}

export function message(name: string, target = name): ReportMessage {
  return { target, specUri: null, report: loadReport(name), notice: null };
}

/** One report of every setup-error and worker-error kind, as the daemon gets it (`regenerate_errors.py`). */
export const ERROR_FIXTURES = [
  "error_missing_package",
  "error_missing_package_factory",
  "error_syntax",
  "error_bad_sample",
  "error_reference",
  "error_timeout",
  "error_oom",
  "error_rank_exit",
] as const;

export const FIXTURES = [
  "helper_model_failed",
  "helper_model_autofix",
  "worker_error",
  "degenerate",
  "unrouted_fixed",
  "unrouted_python",
  "rank_disagreement",
  "suspicious",
  "receptive_fixed",
  "unknown_cause",
  "divergent_op",
  ...ERROR_FIXTURES,
] as const;
