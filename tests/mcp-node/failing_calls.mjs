// Issue 22: the official TypeScript SDK's client (npm @modelcontextprotocol/sdk) shows the user
// somna's own message, with its error class, for a failing call of every tool that can fail.
// The client lists the tools first, so that it validates each result against the tool's output
// schema (a result that broke it would throw -32602 instead of showing the message).
// Run by tests/cli/mcp_node.rs: `node failing_calls.mjs SOMNA_BINARY STORE`, on a store that
// holds the memories #0 and #1 and nothing else. Prints one line per call; exits 1 on a failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [somna, db] = process.argv.slice(2);

// A call that succeeds first, so that the conflicts below have something to conflict with.
const SETUP = [
  ["note", { text: "keyed", key: "k1" }],
  ["session_append", { id: "s1", items: [{ role: "user", content: "hi" }], key: "a1" }],
];

// tool, arguments, the class somna gives.
const FAILING = [
  ["wake", { part: 3, total: 2 }, "invalid"],
  ["note", {}, "invalid"],
  ["note", { text: "other", key: "k1" }, "conflict"],
  ["recall", { pattern: "(" }, "invalid"],
  ["search", { query: "" }, "invalid"],
  ["zoom", { block: "not-a-block" }, "invalid"],
  ["show", { id: 999 }, "not_found"],
  ["why", { block: "0-1" }, "invalid"],
  ["pending", { limit: -1 }, "invalid"],
  ["nap", { block: "0-1" }, "invalid"],
  ["forget", { block: "1-2" }, "invalid"],
  ["decide", { id: 999, action: "accept" }, "not_found"],
  ["session_load", { id: "nope" }, "not_found"],
  ["session_save", { id: "s1", messages: [], expect_revision: 1 }, "conflict"],
  ["session_append", { id: "s1", items: [{ role: "user", content: "other" }], key: "a1" }, "conflict"],
  ["session_list", { limit: "many" }, "invalid"],
  ["session_history", {}, "invalid"],
  ["redact", { id: 999, reason: "test" }, "not_found"],
  ["grant", { principal: "bob", access: "everything", scope: "default" }, "invalid"],
  ["revoke", { principal: "bob", access: "everything", scope: "default" }, "invalid"],
  ["verify", {}, "invalid"],
  ["policy", { settings: ["no_such_setting=1"] }, "invalid"],
];

const transport = new StdioClientTransport({
  command: somna,
  args: ["--db", db, "mcp", "--tools", "all"],
  stderr: "ignore",
});
const client = new Client({ name: "somna-tests", version: "0" });
await client.connect(transport);
const listed = (await client.listTools()).tools.map((t) => t.name);
let failed = 0;
const fail = (what) => {
  failed += 1;
  console.log(`FAIL ${what}`);
};
for (const [name, args] of SETUP) {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) fail(`${name}: setup failed: ${r.content[0].text}`);
}
for (const [name, args, cls] of FAILING) {
  if (!listed.includes(name)) {
    fail(`${name}: not listed`);
    continue;
  }
  let text;
  try {
    const r = await client.callTool({ name, arguments: args });
    text = r.isError ? r.content?.[0]?.text ?? "" : `not an error: ${JSON.stringify(r)}`;
  } catch (e) {
    text = `threw: ${e.message}`;
  }
  const ok = text.startsWith(`${cls}: `) && text.length > cls.length + 2;
  console.log(`${ok ? "ok" : "FAIL"} ${name} ${JSON.stringify(args)} -> ${text.trim()}`);
  if (!ok) failed += 1;
}
// An unknown tool is a protocol error (-32602), which the client throws with the message.
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
  fail("no_such_tool: no error");
} catch (e) {
  const ok = /-32602/.test(e.message) && /unknown tool/.test(e.message);
  console.log(`${ok ? "ok" : "FAIL"} no_such_tool -> ${e.message}`);
  if (!ok) failed += 1;
}
await client.close();
console.log(`${FAILING.length + 1 - failed} of ${FAILING.length + 1} as expected`);
process.exit(failed ? 1 : 0);
