// ioredis (and node-redis for transactions) against the built sluice binary: a plain client with ioredis'
// default handshake (HELLO 3 in ioredis 6) and with RESP2, then ioredis
// Cluster against sluice's single-node cluster emulation. `make test-node`
// builds bin/sluice and runs this with SLUICE_BIN pointing at it.
"use strict";

const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const Redis = require("ioredis");
const { freePort, startSluice } = require("./sluice");

// 2100-01-01T00:00:00Z in ns: a frozen clock no real clock has passed.
const FUTURE = 4102444800n * 1000000000n;

let server;
let port;
let dataDir;

before(async () => {
  const bin = process.env.SLUICE_BIN || path.join(__dirname, "..", "..", "bin", "sluice");
  assert.ok(fs.existsSync(bin), `sluice binary ${bin} not found (make test-node builds it)`);
  port = await freePort();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-node-"));
  server = await startSluice(bin, ["--addr", `127.0.0.1:${port}`, "--data-dir", dataDir, "--enable-debug-command"], 15000);
});

after(() => {
  if (server) server.kill("SIGKILL");
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

async function withClient(options, fn) {
  const client = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1, ...options });
  await client.connect();
  try {
    await fn(client);
  } finally {
    client.disconnect();
  }
}

async function throttleExample(client, key) {
  await client.call("DEBUG", "CLOCK", "SET", FUTURE.toString());
  assert.deepEqual(await client.call("CL.THROTTLE", key, 15, 30, 60), [0, 16, 15, -1, 2]);
  assert.deepEqual(await client.call("CL.THROTTLE", key, 15, 30, 60), [0, 16, 14, -1, 4]);
}

test("ioredis with its default handshake", { timeout: 20000 }, async () => {
  await withClient({}, async (client) => {
    assert.equal(await client.ping(), "PONG");
    await throttleExample(client, "node:default");
    assert.equal(await client.get("node:missing"), null);
    const info = await client.info("server");
    assert.match(info, /redis_mode:cluster/);
    const me = await client.client("INFO");
    assert.match(me, /lib-name=ioredis /);
    assert.match(me, / resp=3 /, "ioredis 6 negotiates RESP3 with HELLO 3 by default");
    const pipe = await client
      .pipeline()
      .call("CL.THROTTLE", "node:pipe", 2, 1, 60)
      .call("CL.THROTTLE", "node:pipe", 2, 1, 60)
      .call("CL.THROTTLE", "node:pipe", 2, 1, 60)
      .call("CL.THROTTLE", "node:pipe", 2, 1, 60)
      .exec();
    assert.deepEqual(
      pipe.map(([err, reply]) => (err ? err.message : reply[0])),
      [0, 0, 0, 1],
    );
  });
});

test("ioredis over RESP2", { timeout: 20000 }, async () => {
  await withClient({ protocol: 2, connectionName: "node-resp2" }, async (client) => {
    await throttleExample(client, "node:resp2");
    assert.equal(await client.client("GETNAME"), "node-resp2");
    assert.match(await client.client("INFO"), / resp=2 /);
    assert.equal(await client.get("node:missing"), null);
    const hello = await client.call("HELLO", "2");
    assert.equal(hello[hello.indexOf("proto") + 1], 2);
    await assert.rejects(client.call("CL.THROTTLE", "k", "x", 1, 1), /ERR value is not an integer/);
  });
});

test("ioredis Cluster routes keys of different slots", { timeout: 20000 }, async () => {
  const cluster = new Redis.Cluster([{ host: "127.0.0.1", port }], { lazyConnect: true });
  try {
    await cluster.connect();
    const keys = ["user:1", "user:2", "user:3", "{tenant}:a", "{tenant}:b"];
    const slots = await Promise.all(keys.map((k) => cluster.call("CLUSTER", "KEYSLOT", k)));
    assert.ok(new Set(slots).size >= 3, `keys should span slots, got ${slots}`);
    for (const key of keys) {
      const reply = await cluster.call("CL.THROTTLE", key, 5, 1, 60);
      assert.deepEqual(reply.slice(0, 3), [0, 6, 5], `first call for ${key}`);
    }
    // A pipeline must keep to one slot in Cluster mode: hash tags do that.
    const pipe = await cluster
      .pipeline()
      .call("CL.THROTTLE", "{tenant}:a", 5, 1, 60)
      .call("CL.THROTTLE", "{tenant}:b", 5, 1, 60)
      .exec();
    assert.deepEqual(pipe.map(([, r]) => r[2]), [4, 4]);
    assert.equal(cluster.nodes("master").length, 1);
    const [node] = cluster.nodes("master");
    assert.equal(node.options.port, port);
    assert.equal(await node.dbsize(), 8);
  } finally {
    cluster.disconnect();
  }
});

test("ioredis multi() is a transaction", { timeout: 20000 }, async () => {
  await withClient({}, async (client) => {
    const res = await client
      .multi()
      .call("CL.THROTTLE", "node:tx", 1, 1, 60)
      .call("CL.THROTTLE", "node:tx", 1, 1, 60)
      .call("EXISTS", "node:tx")
      .exec();
    assert.deepEqual(res.map(([err, r]) => (err ? err.message : Array.isArray(r) ? r[2] : r)), [1, 0, 1]);
    // WATCH, a change by another connection, then EXEC: nothing runs.
    await withClient({}, async (other) => {
      await client.watch("node:w");
      await other.call("QUOTA.CHECK", "node:w", 10, "DAY");
      const aborted = await client.multi().call("QUOTA.CHECK", "node:w", 10, "DAY").exec();
      assert.equal(aborted, null);
      assert.equal((await client.call("QUOTA.GET", "node:w"))[0], 1);
    });
  });
});

test("node-redis multi() is a transaction", { timeout: 20000 }, async () => {
  const { createClient } = require("redis");
  const client = createClient({ socket: { host: "127.0.0.1", port } });
  await client.connect();
  try {
    const res = await client
      .multi()
      .addCommand(["CL.THROTTLE", "node-redis:tx", "1", "1", "60"])
      .addCommand(["CL.THROTTLE", "node-redis:tx", "1", "1", "60"])
      .addCommand(["EXISTS", "node-redis:tx"])
      .exec();
    assert.deepEqual(res.map((r) => (Array.isArray(r) ? r[2] : r)), [1, 0, 1]);
  } finally {
    await client.quit();
  }
});
