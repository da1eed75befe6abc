// ioredis Cluster against a sharded sluice cluster: two groups of three
// processes under one --cluster-map. Every limiter command, on keys of
// both groups' slots, goes to the group that owns it with no help (a key
// exists in its owner group only); RL.CHECK across the groups is all or
// nothing. `make test-node` runs it with SLUICE_BIN.
"use strict";

const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const Redis = require("ioredis");
const { freePort, startSluice } = require("./sluice");

const rules = `domain: x
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: day, requests_per_unit: 10, sluice: {algorithm: gcra, burst: 9}}
  - key: endpoint
    rate_limit: {name: per-endpoint, unit: day, requests_per_unit: 3, sluice: {algorithm: gcra, burst: 2}}
`;

let dir;
const groups = [[], []]; // each member: {port, proc}

async function eventually(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    try {
      if (await fn()) return;
    } catch {
      // not yet
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  const bin = process.env.SLUICE_BIN || path.join(__dirname, "..", "..", "bin", "sluice");
  assert.ok(fs.existsSync(bin), `sluice binary ${bin} not found (make test-node builds it)`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-node-sharded-"));
  const slots = ['"0-8191"', '"8192-16383"'];
  let map = "epoch: 1\ngroups:\n";
  for (let g = 0; g < 2; g++) {
    const members = [];
    for (let j = 0; j < 3; j++) {
      const port = await freePort();
      const raft = await freePort();
      groups[g].push({ id: `g${g + 1}n${j + 1}`, port });
      members.push(`g${g + 1}n${j + 1}: "127.0.0.1:${port}@127.0.0.1:${raft}"`);
    }
    map += `  - id: g${g + 1}\n    slots: [${slots[g]}]\n    members: {${members.join(", ")}}\n`;
  }
  fs.writeFileSync(path.join(dir, "cluster.yaml"), map);
  fs.writeFileSync(path.join(dir, "x.yaml"), rules);
  await Promise.all(
    groups.flat().map(async (m) => {
      m.proc = await startSluice(bin, [
        "--addr", `127.0.0.1:${m.port}`, "--data-dir", path.join(dir, m.id), "--node-id", m.id,
        "--cluster-map", path.join(dir, "cluster.yaml"), "--rules", path.join(dir, "x.yaml"),
      ]);
    }),
  );
});

after(() => {
  for (const m of groups.flat()) if (m.proc) m.proc.kill("SIGKILL");
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test("ioredis Cluster routes every limiter command to the group that owns it", { timeout: 60000 }, async () => {
  const cluster = new Redis.Cluster(
    groups.flat().map((m) => ({ host: "127.0.0.1", port: m.port })),
    { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 1 } },
  );
  await cluster.connect();
  try {
    // Both groups led and fenced, their rules loaded.
    await eventually("both groups serving", async () => {
      for (let i = 0; i < 16; i++) await cluster.call("CL.THROTTLE", `probe${i}`, 100, 100, 60, 0);
      for (const g of groups) {
        const leader = await leaderOf(g);
        if (!leader) return false;
        try {
          if ((await leader.client.call("RL.RULES", "LIST", "x")).length !== 2) return false;
        } finally {
          leader.client.disconnect();
        }
      }
      return true;
    });
    const keys = [];
    const calls = [
      (k) => ["CL.THROTTLE", k, 2, 5, 60],
      (k) => ["SW.CHECK", k, 5, 60],
      (k) => ["FW.CHECK", k, 5, 60],
      (k) => ["QUOTA.CHECK", k, 5, "DAY"],
      (k) => ["CONC.ACQUIRE", k, 2, 30, "r1"],
    ];
    for (let i = 0; i < 30; i++) {
      const k = `io${i}`;
      const reply = await cluster.call(...calls[i % calls.length](k));
      assert.equal(reply[0], 0, `${k}: ${reply}`);
      keys.push(k);
    }
    // Each key in its owner group only.
    const leaders = [await leaderOf(groups[0]), await leaderOf(groups[1])];
    try {
    const owners = new Set();
    for (const k of keys) {
      const slot = Number(await leaders[0].client.call("CLUSTER", "KEYSLOT", k));
      const owner = slot < 8192 ? 0 : 1;
      owners.add(owner);
      for (let g = 0; g < 2; g++) {
        const found = await leaders[g].client.keys(k);
        assert.equal(found.length, g === owner ? 1 : 0, `${k} (slot ${slot}) in group ${g + 1}: ${found}`);
      }
    }
    assert.equal(owners.size, 2, "the keys fell in one group only");
    // RL.CHECK across the groups: three admitted on the endpoint's limit.
    let admitted = 0;
    for (let i = 0; i < 8; i++) {
      const r = await cluster.call("RL.CHECK", "x", "DESCRIPTOR", "user", `iou${i}`, "DESCRIPTOR", "endpoint", "/io");
      if (r[0] === 0) admitted++;
    }
    assert.equal(admitted, 3);
    } finally {
      for (const l of leaders) if (l) l.client.disconnect();
    }
  } finally {
    cluster.disconnect();
  }
});

test("ioredis Cluster keeps its limits through a slot migration (CL.THROTTLE, SW.CHECK, QUOTA.CHECK, RL.CHECK)", { timeout: 60000 }, async () => {
  const cluster = new Redis.Cluster(
    groups.flat().map((m) => ({ host: "127.0.0.1", port: m.port })),
    { lazyConnect: true, retryDelayOnTryAgain: 5, redisOptions: { maxRetriesPerRequest: 1 } },
  );
  await cluster.connect();
  const source = await leaderOf(groups[0]);
  const target = await leaderOf(groups[1]);
  try {
    // Ten units per key (burst 9, one a day; ten an hour; ten a month; the
    // rules' ten a day on two counters, often in two groups): nothing
    // refills meanwhile.
    const keys = Array.from({ length: 40 }, (_, i) => `mig${i}`);
    const command = (k, i) =>
      [
        ["CL.THROTTLE", k, 9, 1, 86400],
        ["SW.CHECK", k, 10, 3600],
        ["QUOTA.CHECK", k, 10, "MONTH"],
        ["RL.CHECK", "x", "DESCRIPTOR", "user", k, "DESCRIPTOR", "user", `${k}~`],
      ][i % 4];
    const granted = new Map(keys.map((k) => [k, 0]));
    let stop = false;
    let calls = 0;
    const errors = [];
    const caller = async (seed) => {
      for (let i = seed; !stop; i += 7) {
        const k = keys[i % keys.length];
        try {
          const r = await cluster.call(...command(k, i % keys.length));
          calls++;
          if (r[0] === 0) granted.set(k, granted.get(k) + 1);
        } catch (e) {
          errors.push(`${k}: ${e.message}`);
        }
      }
    };
    const loops = [1, 2, 3, 4].map(caller);
    await eventually("calls before the move", async () => calls > 200);
    const node = await target.client.call("CLUSTER", "MYID");
    assert.equal(await source.client.call("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 4095, "NODE", node), "OK");
    let job;
    await eventually("the migration succeeded", async () => {
      const jobs = await source.client.call("CLUSTER", "GETSLOTMIGRATIONS");
      job = {};
      const last = jobs[jobs.length - 1];
      for (let i = 0; i + 1 < last.length; i += 2) job[last[i]] = last[i + 1];
      return job.state !== "running";
    });
    assert.equal(job.state, "success", JSON.stringify(job));
    const after = calls;
    await eventually("calls after the move", async () => calls > after + 200);
    stop = true;
    await Promise.all(loops);
    assert.deepEqual(errors, []);
    let moved = 0;
    for (const [k, n] of granted) {
      assert.ok(n <= 10, `${k} admitted ${n} times, limit 10`);
      if (keys.indexOf(k) % 4 === 3) continue; // RL.CHECK's counters have keys of their own
      const slot = Number(await source.client.call("CLUSTER", "KEYSLOT", k));
      if (slot <= 4095 && n > 0) moved++;
      // Each key only in its owner now: the moved slots in group 2.
      const owner = slot <= 4095 || slot >= 8192 ? target : source;
      const other = owner === target ? source : target;
      assert.equal((await owner.client.keys(k)).length, n > 0 ? 1 : 0, `${k} (slot ${slot}) in its owner`);
      assert.equal((await other.client.keys(k)).length, 0, `${k} (slot ${slot}) outside its owner`);
    }
    assert.ok(moved > 0, "no key of the moved slots was charged");
  } finally {
    source.client.disconnect();
    target.client.disconnect();
    cluster.disconnect();
  }
});

// leaderOf is a client of the member of group g that says it is master.
async function leaderOf(g) {
  for (const m of g) {
    // No reconnecting: a client left behind must not keep the test alive.
    const client = new Redis({ host: "127.0.0.1", port: m.port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
    try {
      await client.connect();
      const role = await client.call("ROLE");
      if (role[0] === "master") return { client };
    } catch {
      // down or starting
    }
    client.disconnect();
  }
  return null;
}

test("with a group down, ioredis Cluster created then serves the other group (cluster_state:ok, every slot placed)", { timeout: 60000 }, async () => {
  // Two of g1's three members killed: g1 has no quorum.
  for (const m of groups[0].slice(0, 2)) m.proc.kill("SIGKILL");
  const g2 = groups[1][0];
  const probe = new Redis({ host: "127.0.0.1", port: g2.port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  await probe.connect();
  try {
    await eventually("a g2 member sees g1 leaderless and says ok", async () => {
      const info = await probe.call("CLUSTER", "INFO");
      const failed = Number((/cluster_slots_fail:(\d+)/.exec(info) || [])[1]);
      return info.includes("cluster_state:ok\r\n") && failed > 0;
    });
    // Every live member has noticed too, and places g1's slots on its
    // survivor: until a member's probe (every 250 ms) sees a member dead,
    // it may still name it as g1's master, and ioredis' connect() never
    // returns when its first ready check goes to a dead node (it
    // reconnects, but the promise of the first attempt stays pending).
    // g1's ranges are those listing one of its members (an earlier test
    // moved some of its slots to g2).
    const survivor = groups[0][2];
    const g1Ports = new Set(groups[0].map((m) => m.port));
    const g1Ranges = (slots) => slots.filter((r) => r.slice(2).some((n) => g1Ports.has(Number(n[1]))));
    for (const m of [survivor, ...groups[1]]) {
      const c = new Redis({ host: "127.0.0.1", port: m.port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
      await c.connect();
      try {
        await eventually(`member ${m.port} places g1's slots on its survivor`, async () => {
          const ranges = g1Ranges(await c.call("CLUSTER", "SLOTS"));
          return ranges.length > 0 && ranges.every((r) => Number(r[2][1]) === survivor.port);
        });
      } finally {
        c.disconnect();
      }
    }
    const slots = await probe.call("CLUSTER", "SLOTS");
    const ofG1 = (slot) => g1Ranges(slots).some((r) => r[0] <= slot && slot <= r[1]);
    const placed = slots.reduce((n, r) => n + (r[1] - r[0] + 1), 0);
    assert.equal(placed, 16384, `CLUSTER SLOTS places ${placed} slots`);
    assert.equal(await probe.call("CONFIG", "GET", "cluster-require-full-coverage").then((r) => r[1]), "no");
    // A g2 key and a g1 key.
    let mine, theirs;
    for (let i = 0; !mine || !theirs; i++) {
      const slot = Number(await probe.call("CLUSTER", "KEYSLOT", `down${i}`));
      if (!ofG1(slot)) mine = mine || `down${i}`;
      else theirs = theirs || `down${i}`;
    }
    const cluster = new Redis.Cluster(
      groups.flat().map((m) => ({ host: "127.0.0.1", port: m.port })),
      { lazyConnect: true, clusterRetryStrategy: () => 100, redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 500 } },
    );
    try {
      await cluster.connect();
      const r = await cluster.call("CL.THROTTLE", mine, 5, 5, 60);
      assert.equal(r[0], 0, `g2's key: ${r}`);
      await assert.rejects(cluster.call("CL.THROTTLE", theirs, 5, 5, 60), "g1's key must fail while g1 has no leader");
    } finally {
      cluster.disconnect();
    }
  } finally {
    probe.disconnect();
  }
});
