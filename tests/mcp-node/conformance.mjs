// The official MCP conformance suite (npm @modelcontextprotocol/conformance) against
// `somna mcp --http` on loopback, through proxy.mjs, which adds the bearer token the suite
// cannot send. Run with Node 22 by run.sh: `node conformance.mjs SOMNA_BINARY`. A fresh store
// in a temp directory, a token for it, the server, the proxy, then the suite with
// conformance-baseline.yml; exits with the suite's status.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { startProxy } from "./proxy.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const somna = process.argv[2];
const dir = mkdtempSync(join(tmpdir(), "somna-conformance-"));
const db = join(dir, "memory.redb");
const run = (...args) =>
  execFileSync(somna, ["--db", db, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
run("init");
const token = run("token", "add", "user:conformance").match(/somna_[0-9a-f]+/)?.[0];
if (!token) throw new Error("somna token add printed no token");

// The proxy first: its origin is the server's as the suite sees it, so somna allows it.
let target;
const { server: proxy, port } = await startProxy(() => target, token);
const origins = [`http://localhost:${port}`, `http://127.0.0.1:${port}`];
const child = spawn(somna, ["--db", db, "mcp", "--http", "127.0.0.1:0", "--tools", "all",
  ...origins.flatMap((o) => ["--allow-origin", o])], { stdio: ["ignore", "ignore", "pipe"] });
target = await new Promise((resolve, reject) => {
  let err = "";
  child.stderr.on("data", (d) => {
    err += d;
    const m = err.match(/serving MCP at http:\/\/([^/\s]+)\/mcp/);
    if (m) resolve(m[1]);
  });
  child.on("exit", (code) => reject(new Error(`somna mcp --http exited ${code}: ${err}`)));
});

const require = createRequire(join(here, "package.json"));
const pkg = require.resolve("@modelcontextprotocol/conformance/package.json");
const cli = join(dirname(pkg), require(pkg).bin.conformance ?? require(pkg).bin);
const suite = spawn(process.execPath, [cli, "server", "--url", `http://127.0.0.1:${port}/mcp`,
  "--expected-failures", join(here, "conformance-baseline.yml"), "-o", join(dir, "results")],
  { stdio: ["ignore", "pipe", "inherit"] });
let out = "";
suite.stdout.on("data", (d) => { out += d; });
const code = await new Promise((resolve) => suite.on("exit", resolve));
// The summary only (each scenario's progress lines are noise).
const summary = out.slice(out.indexOf("=== SUMMARY ==="));
console.log(summary.trim() || out);
child.kill();
proxy.close();
rmSync(dir, { recursive: true, force: true });
process.exit(code ?? 1);
