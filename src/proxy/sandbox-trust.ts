// The CA bundle a run with secrets hands to the sandbox: the roots its clients trusted before
// (the host's bundle where the policy trusts it, else the public roots Node ships, the same
// Mozilla list Debian's ca-certificates carries) plus the run's CA, whose certificates the
// egress proxy presents for the secrets' hosts. Written next to the run's sockets and mounted
// read-only, both at its own path and over the image's system bundle, so clients that read no
// variable trust it too. Never the CA's key: only certificates are written here.
import fs from "node:fs";
import path from "node:path";
import tls from "node:tls";
import { SANDBOX_TRUST_FILE } from "./sandbox-trust-file.js";

export { SANDBOX_TRUST_FILE };

export function writeSandboxTrust(runDir: string, runCaPem: string, hostBundle?: string): string {
  const base = hostBundle ? fs.readFileSync(hostBundle, "utf8") : tls.rootCertificates.join("\n");
  const file = path.join(runDir, SANDBOX_TRUST_FILE);
  fs.writeFileSync(file, `${base.trimEnd()}\n# sandbox-run: this run's CA (egress proxy, secrets)\n${runCaPem}`, {
    mode: 0o644,
  });
  return file;
}

/** The roots the proxy checks upstream certificates against: the host bundle added to Node's defaults. */
export function upstreamTrust(hostBundle?: string): string[] | undefined {
  return hostBundle ? [...tls.rootCertificates, fs.readFileSync(hostBundle, "utf8")] : undefined;
}
