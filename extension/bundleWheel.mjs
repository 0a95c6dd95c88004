// Builds distcheck's wheel into extension/bundled/ for the .vsix (`npm run package` runs this first), so
// the walkthrough's "Install distcheck" step installs it into the chosen interpreter: distcheck is on no
// package registry. The wheel is built from this checkout with build isolation (as `make install` builds
// it), by the first of $DISTCHECK_PYTHON, the repository's .venv python, python3. The folder is emptied
// first, so the .vsix carries exactly one wheel, of this version.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const out = join("extension", "bundled");
const venv = join(".venv", "bin", "python");
const python = process.env.DISTCHECK_PYTHON || (existsSync(venv) ? venv : "python3");

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const built = spawnSync(python, ["-m", "pip", "wheel", ".", "--no-deps", "--quiet", "-w", out], {
  stdio: "inherit",
});
if (built.status !== 0) {
  console.error(`bundleWheel: "${python} -m pip wheel ." failed (exit ${built.status ?? built.signal}); see pip's error above, or set DISTCHECK_PYTHON to another Python`);
  process.exit(1);
}
const wheels = readdirSync(out).filter((f) => f.endsWith(".whl"));
if (wheels.length !== 1) {
  console.error(`bundleWheel: expected one wheel in ${out}, found ${wheels.length}`);
  process.exit(1);
}
console.log(`bundleWheel: ${join(out, wheels[0])}`);
