// The TypeScript SDK client against a codemode HTTP gateway, for tests/gateway/test_ts_client.py.
// Usage: node ts_client.mjs NODE_MODULES URL TOKEN SCENARIO; prints one JSON object.
//   timeout-with-progress: a call longer than the client's timeout succeeds because progress
//                          notifications reset it (resetTimeoutOnProgress).
//   timeout-without-reset: the same call gives up at the timeout (the client cancels it); the
//                          next call reports what the cancelled one did.
//   abort:                 the call is aborted after its first progress notification.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, url, token, scenario] = process.argv.slice(2);
const sdk = (path) => import(pathToFileURL(join(modules, "@modelcontextprotocol/sdk/dist/esm", path)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "codemode-test", version: "1.0.0" });
await client.connect(transport);

const slow = "from servers import fake\nprint('started', flush=True)\nprint(fake.slow(seconds=3))";
const out = { scenario, progress: 0 };
const execute = (code, options = {}) =>
  client.callTool({ name: "execute", arguments: { code } }, undefined, options);

try {
  if (scenario === "timeout-with-progress") {
    const result = await execute(slow, {
      timeout: 1500,
      resetTimeoutOnProgress: true,
      onprogress: () => { out.progress += 1; },
    });
    out.stdout = result.structuredContent.stdout;
  } else if (scenario === "timeout-without-reset" || scenario === "abort") {
    const controller = new AbortController();
    try {
      await execute(slow, {
        timeout: scenario === "abort" ? 60000 : 1500,
        signal: controller.signal,
        onprogress: () => {
          out.progress += 1;
          if (scenario === "abort") controller.abort("the user pressed stop");
        },
      });
      out.gave_up = false;
    } catch (error) {
      out.gave_up = true;
      out.error = String(error);
    }
    const next = await execute("print('next')");
    out.next_stdout = next.structuredContent.stdout;
    out.cancelled_before = next.structuredContent.cancelled_before ?? null;
  } else {
    throw new Error(`unknown scenario ${scenario}`);
  }
} finally {
  await client.close();
}
console.log(JSON.stringify(out));
