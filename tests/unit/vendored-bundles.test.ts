// The build's one-file bundles of zod, Ajv with ajv-formats, and yaml (scripts/bundle-vendored.mjs,
// loaded by src/util/vendored.ts in place of the packages) answer as the packages do: the same
// parse results and the same error messages, which the CLI prints.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RESULT_CHECK_AJV_OPTIONS } from "../../src/run/result-validator.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const require = createRequire(import.meta.url);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-vendored-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// biome-ignore lint/suspicious/noExplicitAny: the packages' and the bundles' exports, compared as values
type Loaded = any;
const bundled: Record<string, Loaded> = {};
const packaged: Record<string, Loaded> = {
  zod: require("zod"),
  ajv: { Ajv2020: require("ajv/dist/2020.js").Ajv2020, addFormats: require("ajv-formats").default },
  yaml: require("yaml"),
  dockerode: require("dockerode"),
};

beforeAll(() => {
  execFileSync(process.execPath, [path.join(ROOT, "scripts/bundle-vendored.mjs"), dir], { stdio: "pipe" });
  for (const name of ["zod", "ajv", "yaml", "dockerode"]) bundled[name] = require(path.join(dir, `${name}.cjs`));
}, 60_000);

describe("the vendored bundles", () => {
  it("are one file each, holding their packages' code (they load where no node_modules is), with their notices", () => {
    expect(fs.readdirSync(dir).sort()).toEqual([
      "THIRD_PARTY_NOTICES",
      "ajv.cjs",
      "dockerode.cjs",
      "yaml.cjs",
      "zod.cjs",
    ]);
    // Every package whose code a bundle holds is named with its version and licence text.
    const notices = fs.readFileSync(path.join(dir, "THIRD_PARTY_NOTICES"), "utf8");
    for (const [name, file] of [
      ["zod", "zod.cjs"],
      ["ajv", "ajv.cjs"],
      ["ajv-formats", "ajv.cjs"],
      ["fast-uri", "ajv.cjs"],
      ["yaml", "yaml.cjs"],
      ["dockerode", "dockerode.cjs"],
      ["docker-modem", "dockerode.cjs"],
    ] as const) {
      const { version, license } = require(`${name}/package.json`);
      expect(notices).toContain(`## ${name} ${version} (${license}), in ${file}\n`);
    }
    // The folder is in the system's temp folder: a require of a package from a bundle would fail
    // there (beforeAll loaded all three, and the tests below use them).
    for (const name of ["zod", "ajv", "ajv-formats", "yaml", "dockerode", "docker-modem"])
      expect(() => require.resolve(name, { paths: [dir] })).toThrow(/Cannot find module/);
  });

  it("zod: the same results and messages", () => {
    for (const { z } of [bundled.zod, packaged.zod]) expect(typeof z.looseObject).toBe("function");
    const results = [bundled.zod, packaged.zod].map(({ z }) => {
      const schema = z.object({ name: z.string(), port: z.number().int().min(1) }).strict();
      return [
        schema.safeParse({ name: "a", port: 2 }),
        schema.safeParse({ name: 1, port: 0, extra: true }).error.issues,
        z.looseObject({ a: z.literal("x") }).safeParse({ a: "x", b: 1 }),
      ];
    });
    expect(results[0]).toEqual(results[1]);
    expect(JSON.stringify(results[0])).toContain("expected string");
  });

  it("Ajv with ajv-formats: the same compile errors, results and messages", () => {
    const answers = [bundled.ajv, packaged.ajv].map(({ Ajv2020, addFormats }) => {
      const ajv = new Ajv2020({ allErrors: true, strict: false });
      addFormats(ajv);
      // (As JSON: an object literal with a `then` key reads as a promise to the linter.)
      const check = ajv.compile(
        JSON.parse(
          '{"type":"object","properties":{"mail":{"type":"string","format":"email"},"n":{"type":"integer","maximum":3}},"required":["mail"],"if":{"properties":{"n":{"const":3}}},"then":{"required":["why"]}}',
        ),
      );
      let refusal = "";
      try {
        ajv.compile({ type: "strng" });
      } catch (error) {
        refusal = (error as Error).message;
      }
      return [check({ mail: "a@b.example", n: 1 }), check({ mail: "nope", n: 3 }), check.errors, refusal];
    });
    expect(answers[0]).toEqual(answers[1]);
    expect(answers[0]?.[1]).toBe(false);
    expect(answers[0]?.[3]).toMatch(/schema is invalid/);
  });

  it("Ajv: the build's draft 2020-12 meta-schema check refuses what Ajv's own does, with its message", () => {
    const metaCheck = bundled.ajv.draft2020MetaCheck;
    // Made with the result check's options, all of them: the result check uses it only then.
    expect(metaCheck.madeWith).toEqual({ ...RESULT_CHECK_AJV_OPTIONS, allErrors: true });
    const ajv = new packaged.ajv.Ajv2020(metaCheck.madeWith);
    packaged.ajv.addFormats(ajv);
    const corpus: unknown[] = [
      { type: "object", properties: { a: { type: "string", minLength: 1 } }, required: ["a"] },
      { type: "strng" },
      { type: ["string", "bogus"] },
      { properties: { a: { type: 5 }, constructor: { type: "x" } } },
      { items: [{ type: "string" }] },
      { required: ["a", "a"] },
      { minLength: -1, maxItems: 1.5 },
      { multipleOf: 0 },
      { enum: 7, const: 1 },
      { allOf: [] },
      { anyOf: [{ type: "x" }], not: 3 },
      JSON.parse('{"if":{"type":1},"then":3,"else":{"required":"a"}}'),
      { dependentRequired: { a: [1] }, dependentSchemas: { b: 4 } },
      { prefixItems: {}, contains: { minimum: "1" }, minContains: -1 },
      { $defs: { a: { $ref: 5 } }, $anchor: "1bad", $dynamicRef: 5 },
      // Accepted: Ajv checks no formats against a meta-schema (the pattern is refused when compiled).
      { $id: "::not a uri", pattern: "(" },
      { format: 5 },
      { contentMediaType: 3, deprecated: "yes", examples: 1, title: 2 },
      { unevaluatedProperties: "no", propertyNames: { pattern: 1 }, patternProperties: { "^a": 2 } },
      { properties: { deep: { items: { properties: { deeper: { type: "strnig" } } } } } },
    ];
    const verdicts = corpus.map((schema) => {
      const ours = metaCheck(schema);
      const oursText = ajv.errorsText(metaCheck.errors);
      const theirs = ajv.validateSchema(schema);
      return { schema, ours, oursText, theirs, theirsText: ajv.errorsText(ajv.errors) };
    });
    for (const v of verdicts) expect([v.schema, v.ours, v.oursText]).toEqual([v.schema, v.theirs, v.theirsText]);
    expect(verdicts.filter((v) => v.ours).map((v) => v.schema)).toEqual([corpus[0], corpus[15]]);
    expect(verdicts[1]?.oursText).toMatch(/^data\/type must be equal to one of the allowed values/);
  });

  it("dockerode: the same requests and answers, its rarely used modules loaded on their first call", async () => {
    // An engine on a unix socket that records each request and answers a container list.
    const seen: string[] = [];
    const socket = path.join(dir, "engine.sock");
    const server = http.createServer((request, response) => {
      seen.push(`${request.method} ${request.url} ${request.headers["content-type"] ?? ""}`);
      response.writeHead(200, { "content-type": "application/json" });
      response.end('[{"Id":"abc","Names":["/c"]}]');
    });
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    try {
      const answers = [];
      for (const Docker of [bundled.dockerode, packaged.dockerode]) {
        const docker = new Docker({ socketPath: socket });
        answers.push(await docker.listContainers({ all: true, filters: { label: ["a=b"] } }));
        await docker.getContainer("abc").kill({ signal: "SIGKILL" });
      }
      expect(answers[0]).toEqual(answers[1]);
      expect(answers[0]).toEqual([{ Id: "abc", Names: ["/c"] }]);
      expect(seen.slice(0, 2)).toEqual(seen.slice(2));
      expect(seen[0]).toMatch(/^GET \/containers\/json\?all=true&filters=/);
    } finally {
      server.close();
    }
    // BuildKit's session, BuildKit and ssh2 are not in the bundle: stand-ins require them on first call.
    const text = fs.readFileSync(path.join(dir, "dockerode.cjs"), "utf8");
    for (const file of ["dockerode/lib/session.js", "dockerode/lib/buildkit.js", "docker-modem/lib/ssh.js"])
      expect(text).toContain(`real = from(${JSON.stringify(file)})`);
    expect(text).not.toMatch(/require\("(ssh2|protobufjs|@grpc\/grpc-js)"\)/);
  });

  it("dockerode: a stand-in finds its module through dockerode where the install does not hoist (review, session 44)", () => {
    // An installation laid out as npm's --install-strategy=linked or pnpm lay it out: only dockerode
    // beside sandbox-run, docker-modem in dockerode's own node_modules (split-ca beside docker-modem).
    const install = fs.mkdtempSync(path.join(dir, "linked-"));
    fs.mkdirSync(path.join(install, "dist/vendor"), { recursive: true });
    fs.copyFileSync(path.join(dir, "dockerode.cjs"), path.join(install, "dist/vendor/dockerode.cjs"));
    const dockerode = path.join(install, "node_modules/dockerode");
    fs.mkdirSync(path.join(dockerode, "node_modules"), { recursive: true });
    const real = path.dirname(require.resolve("dockerode/package.json"));
    fs.copyFileSync(path.join(real, "package.json"), path.join(dockerode, "package.json"));
    fs.symlinkSync(path.join(real, "lib"), path.join(dockerode, "lib"));
    fs.symlinkSync(
      path.dirname(require.resolve("docker-modem/package.json")),
      path.join(dockerode, "node_modules/docker-modem"),
    );
    // DOCKER_CERT_PATH makes docker-modem read its CA through split-ca when a client is made.
    const certs = fs.mkdtempSync(path.join(dir, "certs-"));
    const pem = (n: number) => `-----BEGIN CERTIFICATE-----\nQ0E${n}\n-----END CERTIFICATE-----\n`;
    fs.writeFileSync(path.join(certs, "ca.pem"), `${pem(1)}${pem(2)}`);
    for (const name of ["cert.pem", "key.pem"]) fs.writeFileSync(path.join(certs, name), "x");
    const script = `const Docker = require(${JSON.stringify(path.join(install, "dist/vendor/dockerode.cjs"))}); console.log(JSON.stringify(new Docker().modem.ca));`;
    const out = execFileSync(process.execPath, ["-e", script], {
      cwd: install,
      env: {
        PATH: process.env.PATH,
        DOCKER_HOST: "tcp://127.0.0.1:2376",
        DOCKER_TLS_VERIFY: "1",
        DOCKER_CERT_PATH: certs,
      },
      encoding: "utf8",
    });
    expect(JSON.parse(out)).toEqual([pem(1).trim(), pem(2).trim()]);
    // BuildKit's stand-in is an object, as buildkit.js's export is: followProgress reaches the real one.
    const progress = `const Docker = require(${JSON.stringify(path.join(install, "dist/vendor/dockerode.cjs"))}); const { PassThrough } = require("node:stream"); const s = new PassThrough(); new Docker({ socketPath: "/nonexistent" }).followProgress(s, (e, out) => console.log(JSON.stringify([e, out]))); s.end('{"status":"done"}\\n');`;
    const followed = execFileSync(process.execPath, ["-e", progress], {
      cwd: install,
      env: { PATH: process.env.PATH },
      encoding: "utf8",
    });
    expect(JSON.parse(followed)).toEqual([null, [{ status: "done" }]]);
  });

  it("yaml: the same documents and errors", () => {
    const text = "a: 1\nb: [x, y]\na: 2\n";
    const docs = [bundled.yaml, packaged.yaml].map((yaml) => {
      const strict = yaml.parseDocument(text, { uniqueKeys: true });
      const [loose] = yaml.parseAllDocuments(text, { uniqueKeys: false });
      return [strict.errors.map((e: Error) => e.message), loose.toJS({ maxAliasCount: 100 })];
    });
    expect(docs[0]).toEqual(docs[1]);
    expect(docs[0]?.[0]?.[0]).toMatch(/unique/i);
  });
});
