// Helpers the node tests share: a free port, and a sluice process started
// until it says it is ready.
"use strict";

const { spawn } = require("node:child_process");
const net = require("node:net");

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// startSluice runs bin with args and resolves with the process once its
// log says "sluice ready" (rejects if it exits or takes longer than ms).
function startSluice(bin, args, ms = 20000) {
  const proc = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
  let logs = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sluice not ready after ${ms} ms:\n${logs}`)), ms);
    proc.stderr.on("data", (chunk) => {
      logs += chunk;
      if (logs.includes("sluice ready")) {
        clearTimeout(timer);
        proc.stderr.removeAllListeners("data");
        proc.removeAllListeners("exit");
        proc.stderr.resume();
        resolve(proc);
      }
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`sluice exited with ${code}:\n${logs}`));
    });
  });
}

module.exports = { freePort, startSluice };
