/**
 * Real VS Code (code-server 4.100.3) driven by playwright-core with Debian's Chromium.
 * See /work/shared/notes/vscode-e2e.md for why this and not @vscode/test-electron.
 *
 * A session = a fresh temp dir with a copy of `examples/` as the workspace, a fresh user-data-dir and
 * extensions-dir, our .vsix installed, code-server started in its own process group (killed as a group
 * at the end), and a headless Chromium page on it. Screenshots and logs go to tests/e2e/artifacts/<name>/.
 */

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

import { type Browser, type FrameLocator, type Locator, type Page, chromium } from "playwright-core";

export const ROOT = path.resolve(__dirname, "..", "..", "..");
export const CACHE = process.env.DISTCHECK_E2E_CACHE ?? path.join(ROOT, "tests", "e2e", ".cache");
export const CODE_SERVER = path.join(CACHE, "code-server", "node_modules", ".bin", "code-server");
export const CHROMIUM = process.env.DISTCHECK_E2E_CHROMIUM ?? "/usr/bin/chromium";
export const PYTHON = path.join(ROOT, ".venv", "bin", "python");
export const ARTIFACTS = path.join(ROOT, "tests", "e2e", "artifacts");

function vsixPath(): string {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { name: string; version: string };
  return path.join(ROOT, `${manifest.name}-${manifest.version}.vsix`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function copyTree(from: string, to: string): void {
  fs.cpSync(from, to, {
    recursive: true,
    filter: (src) => !/(^|[\\/])(__pycache__|\.pytest_cache|\.mypy_cache|\.ruff_cache)([\\/]|$)/.test(src),
  });
}

/** Is the daemon there to test? (`server/distcheck/lsp` exists and imports with the repo's interpreter.) */
export function daemonStatus(): { present: boolean; importable: boolean; detail: string } {
  const present = fs.existsSync(path.join(ROOT, "server", "distcheck", "lsp"));
  const probe = spawnSync(PYTHON, ["-c", "import distcheck.lsp"], { encoding: "utf8", timeout: 120_000 });
  return {
    present,
    importable: probe.status === 0,
    detail: (probe.stderr || probe.error?.message || "").trim().split("\n").slice(-1)[0] ?? "",
  };
}

export interface SessionOptions {
  name: string;
  /** Extra user settings (merged over the quiet defaults and the interpreter). */
  settings?: Record<string, unknown>;
  /** Changes to the workspace copy before VS Code opens it. */
  prepareWorkspace?: (workspace: string) => void;
  /** false: workspace trust is on and the test answers the trust prompt itself (Restricted Mode tests). */
  trustPrompt?: boolean;
}

export class Session {
  page!: Page;
  private browser: Browser | undefined;
  private server: ChildProcess | undefined;
  private shots = 0;
  readonly tmp: string;
  readonly workspace: string;
  readonly userData: string;
  readonly extensions: string;
  readonly artifacts: string;
  port = 0;

  constructor(readonly options: SessionOptions) {
    this.tmp = fs.mkdtempSync(path.join(os.tmpdir(), `distcheck-e2e-${options.name}-`));
    this.workspace = path.join(this.tmp, "examples");
    this.userData = path.join(this.tmp, "user-data");
    this.extensions = path.join(this.tmp, "extensions");
    this.artifacts = path.join(ARTIFACTS, options.name);
    fs.rmSync(this.artifacts, { recursive: true, force: true });
    fs.mkdirSync(this.artifacts, { recursive: true });
  }

  log(line: string): void {
    const text = `[e2e ${this.options.name} ${new Date().toISOString().slice(11, 19)}] ${line}`;
    console.log(text);
    fs.appendFileSync(path.join(this.artifacts, "steps.log"), `${text}\n`);
  }

  /** `start()` for a test that needs the real daemon: fails first, naming why, when it is not usable. */
  async startWithDaemon(): Promise<void> {
    const daemon = daemonStatus();
    this.log(`daemon: ${daemon.present ? "present" : "absent"}, ${daemon.importable ? "importable" : `not importable (${daemon.detail})`}`);
    if (!daemon.present || !daemon.importable) {
      throw new Error(`e2e ${this.options.name}: the daemon (server/distcheck/lsp) is not usable: ${daemon.detail || "missing"}`);
    }
    await this.start();
  }

  async start(): Promise<void> {
    for (const [what, file] of [
      ["code-server (run tests/e2e/setup.sh)", CODE_SERVER],
      ["Chromium (apt-get install chromium)", CHROMIUM],
      ["the .vsix (npm run package)", vsixPath()],
      ["the repository's .venv (make install)", PYTHON],
    ] as const) {
      if (!fs.existsSync(file)) {
        throw new Error(`e2e: ${what} is missing: ${file}`);
      }
    }
    copyTree(path.join(ROOT, "examples"), this.workspace);
    this.options.prepareWorkspace?.(this.workspace);

    const settings = {
      "workbench.startupEditor": "none",
      "security.workspace.trust.enabled": this.options.trustPrompt === true,
      "telemetry.telemetryLevel": "off",
      "update.mode": "none",
      "extensions.autoUpdate": false,
      "extensions.autoCheckUpdates": false,
      "workbench.enableExperiments": false,
      "workbench.tips.enabled": false,
      "workbench.welcomePage.walkthroughs.openOnInstall": false,
      "chat.commandCenter.enabled": false,
      "window.commandCenter": false,
      "editor.minimap.enabled": false,
      "files.autoSave": "off",
      "distcheck.interpreter": PYTHON,
      "distcheck.trace.server": "messages",
      ...this.options.settings,
    };
    fs.mkdirSync(path.join(this.userData, "User"), { recursive: true });
    fs.writeFileSync(path.join(this.userData, "User", "settings.json"), JSON.stringify(settings, null, 2));
    fs.mkdirSync(this.extensions, { recursive: true });

    this.port = await freePort();
    const config = path.join(this.tmp, "config.yaml");
    fs.writeFileSync(config, `bind-addr: 127.0.0.1:${this.port}\nauth: none\ncert: false\n`);
    const common = ["--config", config, "--user-data-dir", this.userData, "--extensions-dir", this.extensions];

    const install = spawnSync(CODE_SERVER, [...common, "--install-extension", vsixPath()], { encoding: "utf8", timeout: 120_000 });
    fs.writeFileSync(path.join(this.artifacts, "install-extension.log"), `${install.stdout}\n${install.stderr}`);
    if (install.status !== 0 || !/successfully installed/i.test(install.stdout + install.stderr)) {
      throw new Error(`e2e: installing the .vsix failed (exit ${install.status}):\n${install.stdout}\n${install.stderr}`);
    }
    this.log(`installed ${path.basename(vsixPath())}`);

    const logFd = fs.openSync(path.join(this.artifacts, "code-server.log"), "a");
    // detached: the server leads its own process group (setsid), so the whole tree (extension hosts and
    // their language servers) is killed with one signal to the group in close().
    this.server = spawn(
      CODE_SERVER,
      [
        ...common,
        "--disable-telemetry",
        "--disable-update-check",
        ...(this.options.trustPrompt === true ? [] : ["--disable-workspace-trust"]),
        "--disable-getting-started-override",
        this.workspace,
      ],
      { detached: true, stdio: ["ignore", logFd, logFd], env: { ...process.env, DISTCHECK_E2E: "1" } },
    );
    fs.closeSync(logFd);
    this.log(`code-server pid ${this.server.pid} on port ${this.port}, workspace ${this.workspace}`);
    await this.waitForHealth();

    this.browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
      ],
    });
    const context = await this.browser.newContext({ viewport: { width: 1600, height: 1000 } });
    this.page = await context.newPage();
    this.page.setDefaultTimeout(30_000);
    await this.open();
  }

  private async waitForHealth(): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (this.server?.exitCode !== null) {
        throw new Error(`e2e: code-server exited early (code ${this.server?.exitCode}); see ${this.artifacts}/code-server.log`);
      }
      try {
        const res = await fetch(`http://127.0.0.1:${this.port}/healthz`);
        if (res.ok) {
          return;
        }
      } catch {
        // not listening yet
      }
      await sleep(250);
    }
    throw new Error("e2e: code-server did not answer /healthz within 60 s");
  }

  /** Loads (or reloads) the workbench on the workspace and waits for the explorer. */
  async open(): Promise<void> {
    await this.page.goto(`http://127.0.0.1:${this.port}/?folder=${encodeURIComponent(this.workspace)}`);
    await this.page.locator(".monaco-workbench").waitFor({ timeout: 60_000 });
    if (this.options.trustPrompt === true) {
      return; // the test answers the trust dialog
    }
    await this.page.locator(".explorer-folders-view .monaco-list-row").first().waitFor({ timeout: 60_000 });
    await sleep(1500);
  }

  /** "Developer: Reload Window" (a real shutdown: editor layout and webview state are saved first). */
  async reload(): Promise<void> {
    const navigated = this.page.waitForEvent("framenavigated", { predicate: (f) => f === this.page.mainFrame(), timeout: 60_000 });
    await this.palette("Developer: Reload Window");
    await navigated;
    await this.page.locator(".monaco-workbench").waitFor({ timeout: 60_000 });
    await this.page.locator(".explorer-folders-view .monaco-list-row").first().waitFor({ timeout: 60_000 });
    await sleep(1500);
  }

  async shot(name: string): Promise<void> {
    await sleep(400); // toasts and panels animate in
    const file = path.join(this.artifacts, `${String(++this.shots).padStart(2, "0")}-${name}.png`);
    await this.page.screenshot({ path: file });
    this.log(`screenshot ${path.relative(ROOT, file)}`);
  }

  /** A screenshot of one element (scrolled into view first), numbered with the page screenshots. */
  async shotOf(element: Locator, name: string): Promise<void> {
    await element.scrollIntoViewIfNeeded();
    await sleep(400);
    const file = path.join(this.artifacts, `${String(++this.shots).padStart(2, "0")}-${name}.png`);
    await element.screenshot({ path: file });
    this.log(`screenshot ${path.relative(ROOT, file)}`);
  }

  /** Runs a command by its palette title ("Distcheck: Show output"); retries while the palette does not know it yet. */
  async palette(title: string, attempts = 8): Promise<void> {
    for (let i = 0; i < attempts; i++) {
      await this.page.keyboard.press("Escape");
      await this.page.keyboard.press("F1");
      const input = this.page.locator(".quick-input-widget .quick-input-box input");
      await input.waitFor();
      await input.fill(`>${title}`);
      const row = this.page.locator(".quick-input-widget .quick-input-list .monaco-list-row", { hasText: title }).first();
      try {
        await row.waitFor({ timeout: 3000 });
        const label = (await row.getAttribute("aria-label")) ?? (await row.innerText());
        if (!label.includes(title)) {
          throw new Error(`palette row is "${label}"`);
        }
        await this.page.keyboard.press("Enter");
        this.log(`palette: ${title}`);
        return;
      } catch {
        await sleep(1500);
      }
    }
    await this.shot(`palette-missing-${title.replace(/\W+/g, "_")}`);
    throw new Error(`e2e: the command palette never offered "${title}"`);
  }

  /** Picks an item of an open quick pick by typing its label. */
  async quickPick(label: string): Promise<void> {
    const input = this.page.locator(".quick-input-widget .quick-input-box input");
    await input.waitFor();
    await input.fill(label);
    await this.page.locator(".quick-input-widget .quick-input-list .monaco-list-row", { hasText: label }).first().waitFor();
    await this.page.keyboard.press("Enter");
    this.log(`quick pick: ${label}`);
  }

  /** Opens a workspace file with Quick Open. */
  async quickOpen(relative: string): Promise<void> {
    await this.page.keyboard.press("Escape");
    await this.page.keyboard.press("Control+P");
    const input = this.page.locator(".quick-input-widget .quick-input-box input");
    await input.waitFor();
    await input.fill(relative);
    await this.page.locator(".quick-input-widget .quick-input-list .monaco-list-row", { hasText: path.basename(relative) }).first().waitFor();
    await this.page.keyboard.press("Enter");
    await this.page.locator(`.tabs-container .tab[aria-label*="${path.basename(relative)}"]`).first().waitFor();
    this.log(`opened ${relative}`);
  }

  /** The distcheck status bar item. */
  statusItem(): Locator {
    return this.page.locator('.statusbar-item[id$="distcheck.status"]');
  }

  async statusText(): Promise<string> {
    return (await this.statusItem().innerText()).trim();
  }

  async waitForStatus(re: RegExp, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    let last = "";
    while (Date.now() < deadline) {
      last = await this.statusText().catch(() => "");
      if (re.test(last)) {
        this.log(`status bar: ${last}`);
        return last;
      }
      await sleep(500);
    }
    throw new Error(`e2e: status bar never matched ${re} (last: "${last}")`);
  }

  toasts(): Locator {
    return this.page.locator(".notifications-toasts .notification-toast");
  }

  /** The report webview's document. */
  webview(): FrameLocator {
    return this.page.frameLocator("iframe.webview.ready").frameLocator("iframe#active-frame");
  }

  /** Waits until the report page shows `verdict` (e.g. "failed") and its script handles clicks. */
  async reportShows(verdict: string, timeoutMs = 30_000): Promise<FrameLocator> {
    const view = this.webview();
    await view.locator("body[data-ready] #verdict", { hasText: verdict }).waitFor({ timeout: timeoutMs });
    return view;
  }

  /**
   * Problems panel rows as text (opens the panel). The list is virtualised: only the rows on screen
   * exist, so a check for one code passes `filter` (typed into the panel's filter box, cleared after).
   */
  async problems(filter = ""): Promise<string[]> {
    await this.palette("View: Focus Problems (Errors, Warnings, Infos)");
    const box = this.page.locator('.part.panel input[placeholder^="Filter"]').first();
    if (filter) {
      await box.fill(filter);
    }
    const rows = this.page.locator(".markers-panel .monaco-list-row");
    await sleep(800);
    const out: string[] = [];
    for (const row of await rows.all()) {
      out.push(((await row.getAttribute("aria-label")) ?? "") + " | " + (await row.innerText()).replace(/\s+/g, " "));
    }
    if (filter) {
      await box.fill("");
    }
    return out;
  }

  /** Runs `fn`, with a screenshot named after the step when it fails. */
  async step(name: string, fn: () => Promise<void>): Promise<void> {
    this.log(`step: ${name}`);
    try {
      await fn();
    } catch (error) {
      await this.shot(`FAILED-${name.replace(/\W+/g, "_").slice(0, 60)}`).catch(() => undefined);
      throw error;
    }
  }

  /** Lines of the Output panel that match `filter` (typed into the panel's filter box). */
  async outputLines(filter: string): Promise<string> {
    const box = this.page.locator('.part.panel input[placeholder^="Filter"]').first();
    await box.fill(filter);
    await sleep(700);
    const text = await this.page.locator(".part.panel .monaco-editor .view-lines").first().innerText();
    await box.fill("");
    return text.replace(/\u00a0/g, " ");
  }

  /**
   * Changes a setting the way a user does: edits settings.json in the editor and saves it. "remote" is
   * code-server's Remote settings (where machine-scoped settings such as distcheck.interpreter belong
   * in a remote window), "user" the User settings.
   */
  async setSetting(where: "user" | "remote", key: string, value: unknown): Promise<void> {
    const file = path.join(this.userData, where === "user" ? "User" : "Machine", "settings.json");
    const settings = (fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8") || "{}") : {}) as Record<string, unknown>;
    settings[key] = value;
    await this.palette(where === "user" ? "Preferences: Open User Settings (JSON)" : "Preferences: Open Remote Settings (JSON)");
    await this.page.locator('.tabs-container .tab[aria-label*="settings.json"]').first().waitFor();
    const editor = this.page.locator(".editor-instance .monaco-editor").first();
    await editor.click();
    await this.page.keyboard.press("Control+A");
    // insertText types no keys, so auto-closing brackets and quotes do not mangle the JSON
    await this.page.keyboard.insertText(JSON.stringify(settings, null, 2));
    // drop whatever the editor added after the cursor (an auto-closed brace)
    await this.page.keyboard.press("Control+Shift+End");
    await this.page.keyboard.press("Delete");
    await this.page.keyboard.press("Control+S");
    await sleep(500);
    await this.palette("View: Close Editor");
    this.log(`${where} setting ${key} = ${JSON.stringify(value)}`);
  }

  async close(): Promise<void> {
    try {
      await this.browser?.close();
    } catch {
      // already gone
    }
    const pid = this.server?.pid;
    if (pid !== undefined) {
      for (const signal of ["SIGTERM", "SIGKILL"] as const) {
        try {
          process.kill(-pid, signal);
        } catch {
          break; // the group is gone
        }
        await sleep(signal === "SIGTERM" ? 2000 : 200);
      }
      this.log(`killed code-server's process group ${pid}`);
    }
    const logs = path.join(this.userData, "logs");
    if (fs.existsSync(logs)) {
      fs.cpSync(logs, path.join(this.artifacts, "vscode-logs"), { recursive: true });
    }
    fs.rmSync(this.tmp, { recursive: true, force: true });
  }
}
