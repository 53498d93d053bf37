// @ts-check
/**
 * A real `plaudit serve` on a free loopback port with a fresh SQLite store in a temporary
 * directory: what the tests and `npm run gen` talk to when PLAUDIT_URL is not given.
 *
 * The port is chosen by the operating system (`--port 0`) and read back from the server's
 * start-up line, so two runs on one machine never race for the same port.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { accessSync, constants, existsSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const REPO_DIR = resolve(PACKAGE_DIR, "..", "..");
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;
const OUTPUT_KEPT = 64 * 1024; // the server's output kept for error messages

/**
 * @typedef {object} LiveServer
 * @property {string} url       base URL, without a trailing slash
 * @property {string | undefined} token  the bearer token writes need, if the server has one
 * @property {boolean} spawned  true when this process started the server (fresh, empty store)
 * @property {string | undefined} exportRoot  where the server may write exports, when known
 * @property {() => Promise<void>} stop  stops a spawned server and removes its directory
 */

/** @param {string} file */
function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The command that runs plaudit: $PLAUDIT_CMD (a path, or a command line split on spaces such
 * as `uv run plaudit`), else the repository's .venv, else `plaudit` on PATH.
 * @returns {string[]}
 */
export function plauditCommand() {
  const fromEnv = process.env.PLAUDIT_CMD?.trim();
  if (fromEnv) {
    return existsSync(fromEnv) ? [fromEnv] : fromEnv.split(/\s+/);
  }
  for (const venvBin of [join(".venv", "bin", "plaudit"), join(".venv", "Scripts", "plaudit.exe")]) {
    const candidate = join(REPO_DIR, venvBin);
    if (isExecutable(candidate)) return [candidate];
  }
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir && isExecutable(join(dir, "plaudit"))) return [join(dir, "plaudit")];
  }
  throw new Error(
    "cannot find the plaudit command: set PLAUDIT_CMD, create the repository's .venv " +
      "(python3 -m venv .venv && .venv/bin/pip install -e '.[test]'), put plaudit on PATH, " +
      "or point PLAUDIT_URL at a running server",
  );
}

/**
 * The server named by PLAUDIT_URL (and PLAUDIT_TOKEN), if any; otherwise a fresh one.
 * @returns {Promise<LiveServer>}
 */
export async function liveServer() {
  const url = process.env.PLAUDIT_URL?.trim();
  if (url) {
    return {
      url: url.replace(/\/+$/, ""),
      token: process.env.PLAUDIT_TOKEN || undefined,
      spawned: false,
      exportRoot: undefined,
      stop: async () => {},
    };
  }
  return startServer();
}

/**
 * Start `plaudit serve` with a random token and an export root, both inside a new temporary
 * directory that `stop()` removes.
 * @param {{ token?: string | null }} [options]  `token: null` starts a server with open writes
 * @returns {Promise<LiveServer>}
 */
export async function startServer(options = {}) {
  const [cmd, ...prefix] = plauditCommand();
  const dir = await mkdtemp(join(tmpdir(), "plaudit-ts-"));
  const exportRoot = join(dir, "exports");
  await mkdir(exportRoot);
  const token = options.token === null ? undefined : (options.token ?? randomBytes(18).toString("hex"));
  /** @type {NodeJS.ProcessEnv} */
  const env = { ...process.env, PLAUDIT_EXPORT_ROOT: exportRoot };
  delete env.PLAUDIT_TOKEN;
  delete env.PLAUDIT_DB;
  if (token) env.PLAUDIT_TOKEN = token; // through the environment, so it is not in `ps`
  const args = [
    ...prefix,
    "serve",
    "--db",
    join(dir, "plaudit.db"),
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--log-level",
    "info",
  ];
  const child = spawn(cmd, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);

  let output = "";
  const exited = new Promise((resolveExit) =>
    child.once("exit", (code, signal) => resolveExit({ code, signal })),
  );
  const spawnFailed = new Promise((_, reject) => child.once("error", reject));

  /** @returns {Promise<string>} */
  const announced = new Promise((resolveUrl, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`plaudit serve did not start within ${START_TIMEOUT_MS} ms:\n${output}`)),
      START_TIMEOUT_MS,
    );
    /** @param {Buffer} chunk */
    const onData = (chunk) => {
      output = (output + chunk.toString("utf8")).slice(-OUTPUT_KEPT);
      // `plaudit serve` says "plaudit serving <store> on http://host:port/" once it listens.
      const match = /^plaudit serving .* on (https?:\/\/[^\s]+?)\/? /m.exec(output);
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`plaudit serve exited (code ${code}, signal ${signal}) before listening:\n${output}`));
    });
  });

  const stop = async () => {
    process.removeListener("exit", killOnExit);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };

  try {
    const url = await Promise.race([announced, spawnFailed]);
    await waitHealthy(url);
    return { url, token, spawned: true, exportRoot, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** @param {string} url */
async function waitHealthy(url) {
  const deadline = Date.now() + START_TIMEOUT_MS;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/v1/health`);
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`plaudit serve at ${url} never answered /v1/health: ${last}`);
}
