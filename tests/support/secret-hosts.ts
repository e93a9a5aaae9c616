// Stand-ins for the public hosts a job with secrets talks to, on loopback, with real TLS from a
// CA made here by the openssl CLI (an implementation independent of sandbox-run's own CA):
//   git.test   git's smart HTTP (git http-backend as CGI); every request needs HTTP basic with
//              the git token as password; /echo reflects the Authorization header and the token
//   npm.test   a private npm registry serving one package; every request needs Bearer <npm token>;
//              /headers reflects X-Odd-Key as httpbin (Python's JSON) and go-httpbin (Go's) do
//   other.test an allowed host that is listed for no secret: records what it is sent
//   github.com, api.github.com: the same git server, and a REST endpoint (GET /user) that needs
//              Bearer/token <git token>, so the shipped pr-fix policy can run as it is; these
//              real names are never resolved or contacted, every other name is (real DNS)
// The egress proxy reaches them through the agent's test-only egress overrides (run/run-egress.ts): names
// resolve to 127.0.0.1, which the guard lets through, port 443 maps to the servers' ports, and
// the upstream check trusts this CA.
import { execFileSync, spawn } from "node:child_process";
import crypto from "node:crypto";
import dns from "node:dns/promises";
import fs from "node:fs";
import type http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { createAddressGuard } from "../../src/proxy/address-guard.js";
import type { EgressOverrides } from "../../src/run/run-egress.js";

/** The names these servers play; everything else is the real internet. */
const played = (host: string) => host.endsWith(".test") || host === "github.com" || host === "api.github.com";

export interface SeenRequest {
  /** Which server got it: "real" (git.test, npm.test) or "other" (other.test). */
  server: "real" | "other";
  /** The Host header or :authority it carried. */
  host: string;
  protocol: string;
  method: string;
  path: string;
  authorization?: string;
}

export interface SecretHosts {
  dir: string;
  caPem: string;
  /** The bare repository behind https://git.test/repo.git. */
  bareRepo: string;
  seen: SeenRequest[];
  hooks(extra?: Partial<EgressOverrides>): EgressOverrides;
  close(): Promise<void>;
}

type Req = http.IncomingMessage | http2.Http2ServerRequest;
type Res = http.ServerResponse | http2.Http2ServerResponse;

export async function startSecretHosts(tokens: { git: string; npm: string }): Promise<SecretHosts> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-secret-hosts-"));
  const pki = makeTestPki(dir);
  const bareRepo = makeBareRepo(dir);
  const tarball = makePackageTarball(dir);
  const seen: SeenRequest[] = [];
  const record = (server: SeenRequest["server"], req: Req) =>
    seen.push({
      server,
      host: String(req.headers[":authority"] ?? req.headers.host ?? ""),
      protocol: `HTTP/${req.httpVersion}`,
      method: req.method ?? "",
      path: req.url ?? "",
      authorization: req.headers.authorization,
    });
  const gitBasic = `Basic ${Buffer.from(`x-access-token:${tokens.git}`).toString("base64")}`;

  const real = http2.createSecureServer({ key: pki.key, cert: pki.realCert, allowHTTP1: true }, (req, res) => {
    record("real", req);
    const host = String(req.headers[":authority"] ?? req.headers.host ?? "").replace(/:\d+$/, "");
    const auth = req.headers.authorization;
    if (host === "api.github.com") {
      const ok = auth === `Bearer ${tokens.git}` || auth === `token ${tokens.git}`;
      res.writeHead(ok ? 200 : 401, { "content-type": "application/json" });
      return res.end(ok ? '{"login":"sandbox-agent"}' : '{"message":"Requires authentication"}');
    }
    if (host === "git.test" || host === "github.com") {
      if (req.url === "/echo") {
        res.writeHead(200, { "content-type": "text/plain", "x-echo": String(auth) });
        return res.end(`authorization=${auth} token=${tokens.git}\n`);
      }
      if (auth !== gitBasic) {
        res.writeHead(401, { "www-authenticate": 'Basic realm="git.test"' });
        return res.end("credentials needed\n");
      }
      return gitHttpBackend(req, res, dir);
    }
    if (host === "npm.test") {
      if (req.url === "/headers") {
        const json = JSON.stringify({ headers: { "X-Odd-Key": req.headers["x-odd-key"] } });
        const go = json.replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(`${json} ${go}\n`);
      }
      if (auth !== `Bearer ${tokens.npm}`) {
        res.writeHead(401, { "content-type": "application/json" });
        return res.end('{"error":"auth required"}');
      }
      if (req.url === "/hello-private") {
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(JSON.stringify(packument(tarball.bytes)));
      }
      if (req.url === "/hello-private/-/hello-private-1.0.0.tgz") {
        res.writeHead(200, { "content-type": "application/octet-stream" });
        return res.end(tarball.bytes);
      }
    }
    res.writeHead(404);
    res.end("not found\n");
  });
  const other = https.createServer({ key: pki.key, cert: pki.otherCert }, (req, res) => {
    record("other", req);
    req.resume();
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("captured\n");
  });
  const listen = (server: http2.Http2SecureServer | https.Server) =>
    new Promise<number>((resolve) =>
      server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)),
    );
  const realPort = await listen(real);
  const otherPort = await listen(other);
  const guard = createAddressGuard();

  return {
    dir,
    caPem: pki.caPem,
    bareRepo,
    seen,
    hooks: (extra = {}) => ({
      resolve: async (host) =>
        played(host) ? [{ address: "127.0.0.1", family: 4 }] : dns.lookup(host, { all: true, verbatim: true }),
      guard: (address) => (address === "127.0.0.1" ? undefined : guard(address)),
      upstreamPort: (host, port) =>
        port !== 443 || !played(host) ? port : host === "other.test" ? otherPort : realPort,
      upstreamCa: [pki.caPem],
      ...extra,
    }),
    close: async () => {
      other.closeAllConnections();
      await Promise.all([
        new Promise((resolve) => real.close(resolve)),
        new Promise((resolve) => other.close(resolve)),
      ]);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function makeTestPki(dir: string) {
  const file = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: ["ignore", "pipe", "pipe"] });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  openssl(
    "req",
    "-x509",
    ...ec,
    "-keyout",
    file("ca.key"),
    "-out",
    file("ca.pem"),
    "-days",
    "2",
    "-subj",
    "/CN=sandbox-run test hosts CA",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign",
  );
  openssl("req", ...ec, "-keyout", file("server.key"), "-out", file("server.csr"), "-subj", "/CN=test hosts");
  const issue = (name: string, sans: string) => {
    fs.writeFileSync(
      file(`${name}.ext`),
      `subjectAltName=${sans}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n`,
    );
    openssl(
      "x509",
      "-req",
      "-in",
      file("server.csr"),
      "-CA",
      file("ca.pem"),
      "-CAkey",
      file("ca.key"),
      "-CAcreateserial",
      "-days",
      "2",
      "-out",
      file(`${name}.pem`),
      "-extfile",
      file(`${name}.ext`),
    );
    return fs.readFileSync(file(`${name}.pem`), "utf8");
  };
  return {
    caPem: fs.readFileSync(file("ca.pem"), "utf8"),
    key: fs.readFileSync(file("server.key"), "utf8"),
    realCert: issue("real", "DNS:git.test,DNS:npm.test,DNS:github.com,DNS:api.github.com"),
    otherCert: issue("other", "DNS:other.test"),
  };
}

function makeBareRepo(dir: string): string {
  const bare = path.join(dir, "repo.git");
  const seed = path.join(dir, "seed");
  const git = (cwd: string, ...args: string[]) =>
    execFileSync("git", ["-c", "init.defaultBranch=main", "-c", "user.name=t", "-c", "user.email=t@t", ...args], {
      cwd,
      stdio: "pipe",
    });
  fs.mkdirSync(seed);
  git(dir, "init", "--bare", "-q", bare);
  git(seed, "init", "-q");
  fs.writeFileSync(path.join(seed, "README.md"), "seed\n");
  git(seed, "add", "README.md");
  git(seed, "commit", "-qm", "seed");
  git(seed, "push", "-q", bare, "HEAD:refs/heads/main");
  return bare;
}

/** git http-backend as CGI: the request's method, path and body in, its CGI answer out. */
function gitHttpBackend(req: Req, response: Res, projectRoot: string): void {
  const res = response as http.ServerResponse;
  const url = new URL(req.url ?? "/", "https://git.test");
  const child = spawn("git", ["http-backend"], {
    env: {
      PATH: process.env.PATH,
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: "1",
      REMOTE_USER: "agent", // enables receive-pack (push)
      REMOTE_ADDR: "127.0.0.1",
      REQUEST_METHOD: req.method ?? "GET",
      PATH_INFO: url.pathname,
      QUERY_STRING: url.search.slice(1),
      CONTENT_TYPE: String(req.headers["content-type"] ?? ""),
      HTTP_CONTENT_ENCODING: String(req.headers["content-encoding"] ?? ""),
      GIT_PROTOCOL: String(req.headers["git-protocol"] ?? ""),
    },
    stdio: ["pipe", "pipe", "ignore"],
  });
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on("data", (chunk: Buffer) => {
    if (headersDone) return void res.write(chunk);
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end < 0) return;
    headersDone = true;
    const headers: Record<string, string> = {};
    let status = 200;
    for (const line of head.subarray(0, end).toString().split("\r\n")) {
      const [name, ...rest] = line.split(":");
      const value = rest.join(":").trim();
      if (name!.toLowerCase() === "status") status = Number.parseInt(value, 10);
      else headers[name!.toLowerCase()] = value;
    }
    res.writeHead(status, headers);
    res.write(head.subarray(end + 4));
  });
  child.stdout.on("end", () => res.end());
}

function makePackageTarball(dir: string): { bytes: Buffer } {
  const root = path.join(dir, "pkg");
  fs.mkdirSync(path.join(root, "package"), { recursive: true });
  fs.writeFileSync(
    path.join(root, "package", "package.json"),
    JSON.stringify({ name: "hello-private", version: "1.0.0", main: "index.js" }),
  );
  fs.writeFileSync(path.join(root, "package", "index.js"), "module.exports = 'hello from a private registry';\n");
  execFileSync("tar", ["-czf", path.join(root, "pkg.tgz"), "-C", root, "package"]);
  return { bytes: fs.readFileSync(path.join(root, "pkg.tgz")) };
}

function packument(tarball: Buffer) {
  return {
    name: "hello-private",
    "dist-tags": { latest: "1.0.0" },
    versions: {
      "1.0.0": {
        name: "hello-private",
        version: "1.0.0",
        main: "index.js",
        dist: {
          tarball: "https://npm.test/hello-private/-/hello-private-1.0.0.tgz",
          shasum: crypto.createHash("sha1").update(tarball).digest("hex"),
          integrity: `sha512-${crypto.createHash("sha512").update(tarball).digest("base64")}`,
        },
      },
    },
  };
}
