/**
 * A workspace that would run code the moment anything imported it carelessly: `json.py`, `torch.py`
 * and `distcheck.py` shadow the modules of those names, and `pyproject.toml` names an in-tree build
 * backend; each writes a marker file (outside the workspace) when it runs. The target `marked` is the
 * only code a validation may import, and it writes a `model.*` marker.
 */

import * as fs from "node:fs";
import * as path from "node:path";

const SHADOWED = ["json", "torch", "distcheck"] as const;

/** Where the markers of the workspace `ws` land. */
export function markerDir(ws: string): string {
  return path.join(path.dirname(ws), "markers");
}

/** The markers written so far (file names `<what>.<pid>`). */
export function markers(ws: string): string[] {
  const dir = markerDir(ws);
  return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
}

function marker(dir: string, what: string): string {
  return `import os as _os\nopen(_os.path.join(${JSON.stringify(dir)}, ${JSON.stringify(what)} + "." + str(_os.getpid())), "w").close()\n`;
}

/** Adds the shadowing files, the build backend and the `marked` target to the workspace `ws`. */
export function addShadowFiles(ws: string): void {
  const dir = markerDir(ws);
  fs.mkdirSync(dir, { recursive: true });
  for (const name of SHADOWED) {
    fs.writeFileSync(path.join(ws, `${name}.py`), `${marker(dir, name)}raise ImportError("the workspace's ${name}.py was imported")\n`);
  }
  fs.writeFileSync(path.join(ws, "evil_backend.py"), marker(dir, "pyproject-backend"));
  fs.writeFileSync(
    path.join(ws, "marked_model.py"),
    `${marker(dir, "model")}from examples.pair_potential import model_factory, sample_batch  # noqa: E402,F401\n`,
  );
  const pyproject = path.join(ws, "pyproject.toml");
  fs.writeFileSync(
    pyproject,
    `[build-system]\nrequires = []\nbuild-backend = "evil_backend"\nbackend-path = ["."]\n\n${fs.readFileSync(pyproject, "utf8")}` +
      `\n[[tool.distcheck.targets]]\nname = "marked"\nfactory = "marked_model:model_factory"\nsample = "marked_model:sample_batch"\n`,
  );
}
