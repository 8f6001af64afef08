// The TypeScript SDK client declaring elicitation against a codemode HTTP gateway, for
// tests/gateway/test_ts_elicitation.py. Usage: node ts_elicit_client.mjs NODE_MODULES URL TOKEN
// DECISION CODE; prints one JSON object. Form requests are answered with DECISION (allow_call,
// allow_tool, deny; "decline" declines); URL requests are accepted, and the page is loaded and
// submitted with DECISION as a browser would (its cookie kept, its check value sent back).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, url, token, decision, code] = process.argv.slice(2);
const sdk = (path) => import(pathToFileURL(join(modules, "@modelcontextprotocol/sdk/dist/esm", path)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ElicitRequestSchema } = await sdk("types.js");

const out = { asked: [], page: null };
const client = new Client(
  { name: "codemode-elicit-test", version: "1.0.0" },
  { capabilities: { elicitation: { form: {}, url: {} } } },
);
const pages = [];

async function decideOnPage(link) {
  const page = await fetch(link);
  const html = await page.text();
  const cookie = (page.headers.get("set-cookie") || "").split(";")[0];
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)[1];
  const done = await fetch(link, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: new URLSearchParams({ csrf, decision }).toString(),
  });
  out.page = { status: page.status, decided: done.status, html };
}

client.setRequestHandler(ElicitRequestSchema, async (request) => {
  const params = request.params;
  out.asked.push({ mode: params.mode ?? "form", message: params.message });
  if (params.mode === "url") {
    pages.push(decideOnPage(params.url));
    return { action: "accept" };
  }
  if (decision === "decline") return { action: "decline" };
  return { action: "accept", content: { decision } };
});

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
try {
  const result = await client.callTool({ name: "execute", arguments: { code } });
  await Promise.all(pages);
  out.protocol = transport.protocolVersion ?? null;
  out.result = result;
} finally {
  await client.close();
}
console.log(JSON.stringify(out));
