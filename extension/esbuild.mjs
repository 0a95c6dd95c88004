// Builds the extension bundle (extension/dist/extension.js) and, with --tests, the unit tests
// (tests/extension/out/*.test.js) and, with --e2e, the UI tests (tests/e2e/out/*.js).
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

import * as esbuild from "esbuild";

const args = new Set(process.argv.slice(2));
const production = args.has("--production");

const common = {
  bundle: true,
  platform: "node",
  target: "node20",
  format: "cjs",
  sourcemap: production ? false : "linked",
  logLevel: "warning",
};

// a test output folder is emptied first, so that running every file in it runs exactly today's tests
function fresh(outdir) {
  rmSync(outdir, { recursive: true, force: true });
  return outdir;
}

function entries(dir, suffix) {
  return readdirSync(dir)
    .filter((f) => f.endsWith(suffix))
    .map((f) => join(dir, f));
}

if (args.has("--tests")) {
  await esbuild.build({
    ...common,
    entryPoints: entries("tests/extension", ".test.ts"),
    outdir: fresh("tests/extension/out"),
    sourcemap: "inline",
    // unit tests load only the pure modules; `vscode` must never be needed
    external: [],
  });
} else if (args.has("--e2e")) {
  await esbuild.build({
    ...common,
    entryPoints: entries("tests/e2e", ".ts"),
    outdir: fresh("tests/e2e/out"),
    sourcemap: "inline",
    external: ["playwright-core"],
  });
} else {
  const options = {
    ...common,
    entryPoints: ["extension/src/extension.ts"],
    outfile: "extension/dist/extension.js",
    external: ["vscode"],
    minify: production,
  };
  if (args.has("--watch")) {
    const ctx = await esbuild.context(options);
    await ctx.watch();
  } else {
    await esbuild.build(options);
  }
}
