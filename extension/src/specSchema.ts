/**
 * The schema VS Code's JSON language service checks `*.distspec.json` files against. `package.json`'s
 * `jsonValidation` names `distcheck-schema://schemas/distspec.schema.json`, served here: the full bundled
 * schema while the distcheck server is not running (it failed to start, stopped, or has no usable
 * interpreter), so a spec file is always checked; its hints-only form (`specSchemaHints.ts`) while the
 * server runs, so each mistake shows once, as the server's `spec-invalid`, and the JSON service still
 * completes and explains the file. The JSON service re-reads the schema when this document changes.
 */

import * as vscode from "vscode";

import { type JsonValue, hintsOnlySchema } from "./specSchemaHints";

export const SPEC_SCHEMA_SCHEME = "distcheck-schema";
export const SPEC_SCHEMA_URI = vscode.Uri.parse(`${SPEC_SCHEMA_SCHEME}://schemas/distspec.schema.json`);

/** What the provider needs of the server manager: whether the server runs, and when that changes. */
export interface ServerState {
  readonly running: boolean;
  readonly onDidChangeRunning: vscode.Event<boolean>;
}

export class SpecSchemaProvider implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private hintsOnly: boolean;
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly schemaFile: vscode.Uri,
    server: ServerState,
  ) {
    this.hintsOnly = server.running;
    this.subscription = server.onDidChangeRunning((running) => this.serverRunning(running));
  }

  /** Switches between the hints-only and the full schema; the JSON service is told only when it changes. */
  serverRunning(running: boolean): void {
    if (running !== this.hintsOnly) {
      this.hintsOnly = running;
      this.changed.fire(SPEC_SCHEMA_URI);
    }
  }

  async provideTextDocumentContent(): Promise<string> {
    const full = JSON.parse(new TextDecoder().decode(await vscode.workspace.fs.readFile(this.schemaFile))) as JsonValue;
    return JSON.stringify(this.hintsOnly ? hintsOnlySchema(full) : full, null, 2);
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}

/**
 * Serves the spec schema for `jsonValidation` (registered first thing at activation; `onFileSystem:distcheck-schema`
 * activates the extension when the JSON service asks before that).
 */
export function registerSpecSchema(context: vscode.ExtensionContext, server: ServerState): vscode.Disposable {
  const provider = new SpecSchemaProvider(vscode.Uri.joinPath(context.extensionUri, "extension", "schemas", "distspec.schema.json"), server);
  return vscode.Disposable.from(provider, vscode.workspace.registerTextDocumentContentProvider(SPEC_SCHEMA_SCHEME, provider));
}
