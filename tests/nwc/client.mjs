// The NWC client side of tests/integration/nwc.rs: Alby's SDK (@getalby/sdk), the
// client library wallet apps use, and for what an app would never send on purpose (a
// stale request, one sent twice, an unknown encryption) nostr-tools, the library under
// it. One command per run; the answer is one line of JSON on stdout.
//
//   node client.mjs info <uri>
//   node client.mjs call <uri> <method> <params-json> [nip04]
//   node client.mjs raw <uri> <method> <params-json> <options-json>
//   node client.mjs bench <uri> <method> <count>
//   node client.mjs listen <uri> <count> <timeout-ms> [nip04]
//
// `call` answers {"result": ..., "ms"} or {"error": {"code", "message"}}; `bench` the
// times of <count> requests on one connected client, {"ms": [...]}; `raw` sends a request
// made by hand ({"encryption": "nip44_v2" | "nip04" | "none" | other, "created_at",
// "expiration", "wait_ms", "until", "kind"}) to every relay of the connection and answers
// {"published": [each relay's "ok" or refusal], "responses":
// [decrypted contents]} (the same response event from two relays counts once; a response
// with a `d` tag, one payment of a multi_pay_invoice, has it as "d" beside its content).
// `listen` subscribes to the wallet's notifications as an app does (under NIP-04 with
// `nip04`: kind 23196), prints {"ready": true}, then {"notifications": [...]} once <count>
// came or <timeout-ms> passed.
import WebSocket from "ws";
globalThis.WebSocket ??= WebSocket;

import { NWCClient } from "@getalby/sdk/nwc";
import { finalizeEvent, getPublicKey, nip04, nip44 } from "nostr-tools";
import { SimplePool, useWebSocketImplementation } from "nostr-tools/pool";
import { hexToBytes } from "nostr-tools/utils";

useWebSocketImplementation(WebSocket);

const [command, uri, method, paramsJson, extra] = process.argv.slice(2);
const print = (value) => process.stdout.write(JSON.stringify(value) + "\n");

const methods = {
  get_info: (c) => c.getInfo(),
  get_balance: (c) => c.getBalance(),
  get_budget: (c) => c.getBudget(),
  pay_invoice: (c, p) => c.payInvoice(p),
  make_invoice: (c, p) => c.makeInvoice(p),
  lookup_invoice: (c, p) => c.lookupInvoice(p),
  list_transactions: (c, p) => c.listTransactions(p),
  multi_pay_invoice: (c, p) => c.multiPayInvoice(p),
};

async function call() {
  const client = new NWCClient({ nostrWalletConnectUrl: uri });
  try {
    if (extra === "nip04") {
      // What a client that speaks only NIP-04 does: no encryption tag, NIP-04 content.
      client._encryptionType = "nip04";
    }
    const started = performance.now();
    const result = await methods[method](client, JSON.parse(paramsJson || "{}"));
    // The request's own time: sent, executed, answered (no process start).
    print({ result, ms: performance.now() - started });
  } catch (e) {
    print({ error: { code: e.code ?? "CLIENT", message: String(e.message ?? e) } });
  } finally {
    client.close();
  }
}

// `bench <uri> <method> <n>`: one connected client, n requests one after another;
// each one's time in ms.
async function bench() {
  const client = new NWCClient({ nostrWalletConnectUrl: uri });
  try {
    const ms = [];
    for (let i = 0; i < Number(paramsJson); i++) {
      const started = performance.now();
      await methods[method](client, {});
      ms.push(performance.now() - started);
    }
    print({ ms });
  } catch (e) {
    print({ error: { code: e.code ?? "CLIENT", message: String(e.message ?? e) } });
  } finally {
    client.close();
  }
}

async function info() {
  const client = new NWCClient({ nostrWalletConnectUrl: uri });
  try {
    print(await client.getWalletServiceInfo());
  } catch (e) {
    print({ error: { code: "CLIENT", message: String(e.message ?? e) } });
  } finally {
    client.close();
  }
}

async function raw() {
  const { relayUrls, walletPubkey, secret } = NWCClient.parseWalletConnectUrl(uri);
  const options = JSON.parse(extra || "{}");
  const key = hexToBytes(secret);
  const encryption = options.encryption ?? "nip44_v2";
  const content = JSON.stringify({ method, params: JSON.parse(paramsJson || "{}") });
  const nip44Key = nip44.getConversationKey(key, walletPubkey);
  const sealed =
    encryption === "nip44_v2"
      ? nip44.encrypt(content, nip44Key)
      : await nip04.encrypt(secret, walletPubkey, content);
  const tags = [["p", walletPubkey]];
  if (encryption !== "none" && encryption !== "nip04") tags.push(["encryption", encryption]);
  if (encryption === "nip04" && options.tag_nip04) tags.push(["encryption", "nip04"]);
  if (options.expiration) tags.push(["expiration", String(options.expiration)]);
  const event = finalizeEvent(
    {
      kind: options.kind ?? 23194,
      created_at: options.created_at ?? Math.floor(Date.now() / 1000),
      tags,
      content: sealed,
    },
    key,
  );
  const pool = new SimplePool();
  const responses = [];
  const sub = pool.subscribe(
    relayUrls,
    { kinds: [23195], authors: [walletPubkey], "#e": [event.id] },
    {
      onevent: async (reply) => {
        // SimplePool passes each event id once.
        let text;
        try {
          text = nip44.decrypt(reply.content, nip44Key);
        } catch {
          text = await nip04.decrypt(secret, walletPubkey, reply.content);
        }
        const d = reply.tags.find((t) => t[0] === "d")?.[1];
        responses.push({ ...JSON.parse(text), ...(d === undefined ? {} : { d }) });
      },
    },
  );
  // Every relay of the connection gets the request, as a client publishes it; a
  // relay that already has it says "duplicate", which is not an error here.
  const published = (await Promise.allSettled(pool.publish(relayUrls, event))).map((o) =>
    o.status === "fulfilled" ? "ok" : String(o.reason?.message ?? o.reason),
  );
  // Until `wait_ms` has passed, or `until` responses came (then a moment more, for
  // any that should not come).
  const deadline = Date.now() + (options.wait_ms ?? 3000);
  while (Date.now() < deadline && responses.length < (options.until ?? Infinity)) {
    await new Promise((r) => setTimeout(r, 100));
  }
  if (options.until) await new Promise((r) => setTimeout(r, 2000));
  sub.close();
  pool.close(relayUrls);
  print({ id: event.id, client: getPublicKey(key), published, responses });
}

async function listen() {
  const [count, timeoutMs, encryption] = [Number(method), Number(paramsJson), extra];
  const client = new NWCClient({ nostrWalletConnectUrl: uri });
  try {
    if (encryption === "nip04") client._encryptionType = "nip04";
    const notifications = [];
    const unsubscribe = await client.subscribeNotifications((n) => notifications.push(n));
    print({ ready: true });
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && notifications.length < count) {
      await new Promise((r) => setTimeout(r, 100));
    }
    unsubscribe();
    print({ notifications });
  } catch (e) {
    print({ error: { code: e.code ?? "CLIENT", message: String(e.message ?? e) } });
  } finally {
    client.close();
  }
}

const run = { bench, call, info, listen, raw }[command];
if (!run) {
  print({ error: { code: "USAGE", message: `unknown command ${command}` } });
  process.exit(2);
}
await run();
process.exit(0);
