/** "▶ Validate distribution" above configured factories (from `distcheck/targets`) and module-level `def model_factory`. */

import * as vscode from "vscode";

import { type TargetInfo } from "./report";
import { configLensSpots, lensSpots, moduleLevelDefs } from "./targets";

export class ValidateLensProvider implements vscode.CodeLensProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.changed.event;
  private targets: TargetInfo[] = [];
  private fetched = 0;
  private fetching: Promise<void> | undefined;

  constructor(private readonly loadTargets: () => Promise<TargetInfo[]>) {}

  /** Forget the cached targets (pyproject.toml changed, server restarted) and redraw. */
  refresh(): void {
    this.fetched = 0;
    this.changed.fire();
  }

  private async ensureTargets(): Promise<void> {
    if (Date.now() - this.fetched < 10_000) {
      return;
    }
    if (!this.fetching) {
      this.fetching = this.loadTargets()
        .then((t) => {
          this.targets = t;
        })
        .catch(() => {
          // server not available: lenses from the file itself still show
        })
        .finally(() => {
          this.fetched = Date.now();
          this.fetching = undefined;
        });
    }
    await this.fetching;
  }

  async provideCodeLenses(document: vscode.TextDocument): Promise<vscode.CodeLens[]> {
    const isConfig = document.uri.path.endsWith("/pyproject.toml");
    if (document.languageId !== "python" && !isConfig) {
      return [];
    }
    const uri = document.uri.toString();
    await this.ensureTargets();
    const spots = isConfig ? configLensSpots(uri, this.targets) : lensSpots(document.getText(), uri, this.targets);
    return spots.map((spot) => {
      const range = new vscode.Range(spot.line, 0, spot.line, 0);
      return new vscode.CodeLens(range, {
        title: spot.title,
        command: "distcheck.validateCommand",
        arguments: [spot.arg],
        tooltip: "Run the model domain-decomposed over ranks and compare with one process",
      });
    });
  }

  dispose(): void {
    this.changed.dispose();
  }
}

/** Has this Python document a module-level model_factory (for the editor title button)? */
export function hasModuleFactory(document: vscode.TextDocument | undefined): boolean {
  return !!document && document.languageId === "python" && moduleLevelDefs(document.getText(), "model_factory").length > 0;
}
