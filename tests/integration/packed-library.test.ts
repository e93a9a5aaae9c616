// The library as a TypeScript user gets it from npm: `npm pack`, the tarball installed into a new
// project with a strict tsconfig (strict, skipLibCheck false, NodeNext), and a file that uses run()
// with an `as const` schema and asserts the inferred types at compile time. tsc must pass; the same
// file with one wrong assertion must fail, so the check can fail. Also: the package carries its
// LICENSE and the docs the README links to. (Needs `npm run build` and the npm registry or cache.)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ProcessResult, runProcess } from "../support/harness.js";

const repo = path.resolve(import.meta.dirname, "../..");
const installed = (name: string) =>
  JSON.parse(fs.readFileSync(path.join(repo, "node_modules", name, "package.json"), "utf8")).version as string;

const CONSUMER = `import {
  agent,
  bindAgent,
  ContainerPiAgent,
  DockerEngine,
  EnginePool,
  isSandboxRunError,
  type FromSchema,
  type ReportedErrorCode,
  type SandboxRunErrorCode,
} from "sandbox-run";
import { scriptedModel } from "sandbox-run/testing";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function expectType<T extends true>(): void {}

const review = {
  type: "object",
  properties: {
    verdict: { enum: ["approve", "reject"] },
    score: { type: "integer" },
    reason: { type: "string" },
    files: { type: "array", items: { type: "string" } },
  },
  required: ["verdict", "score"],
} as const;
type Review = { verdict: "approve" | "reject"; score: number; reason?: string; files?: string[] };

export async function useIt(pi: ContainerPiAgent): Promise<void> {
  const typed = await pi.run("Review this change", { cwd: ".", schema: review });
  expectType<Equal<typeof typed, Review>>(); // ASSERTION

  const text = await pi.run("Explain src/");
  expectType<Equal<typeof text, string>>();

  const explicit = await pi.run<{ verdict: string }>("Review", { schema: { type: "object" } });
  expectType<Equal<typeof explicit, { verdict: string }>>();

  const details = await pi.runDetailed("Review", { schema: review });
  expectType<Equal<typeof details.result, FromSchema<typeof review>>>();

  // agent() takes every per-run option and types results the same way.
  const viaAgent = await agent("Review", {
    schema: review,
    models: { providers: {} },
    policy: "read-only",
    timeoutMs: 60_000,
    signal: AbortSignal.timeout(60_000),
  });
  expectType<Equal<typeof viaAgent, Review>>();
  const inline = await agent("Done?", {
    schema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
  });
  expectType<Equal<typeof inline, { ok: boolean }>>();

  const bound = bindAgent(pi);
  const fromBound = await bound("Review", { schema: review, maxTurns: 3 });
  expectType<Equal<typeof fromBound, Review>>();

  // @ts-expect-error timeoutMs is a number of milliseconds
  await agent("x", { timeoutMs: "soon" });

  new DockerEngine({ name: "local" }).close();
  EnginePool.of(new DockerEngine()).close();
  await using model = await scriptedModel([{ final: { verdict: "approve", score: 1 } }]);
  await new ContainerPiAgent({ ...model.options }).run("Review", { schema: review });
  try {
    await pi.run("x", { signal: AbortSignal.abort() });
  } catch (error) {
    if (isSandboxRunError(error) && error.code === "aborted") console.log(error.hint, error.cause);
  }
  // What an envelope or a record may name: every error code, and "internal" for a bug.
  const reported: ReportedErrorCode[] = ["internal", "aborted"];
  const code: SandboxRunErrorCode = "timeout";
  // @ts-expect-error "internal" is no SandboxRunError's code
  const never: SandboxRunErrorCode = "internal";
  console.log(reported, code, never);
}
`;

describe("the packed library in a strict TypeScript project", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-consumer-"));
  const project = path.join(dir, "consumer");
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  // Child processes, not *Sync: the worker must keep answering vitest while npm and tsc work.
  const tsc = (config: string) =>
    runProcess(process.execPath, [path.join(project, "node_modules/typescript/bin/tsc"), "-p", config], {
      cwd: project,
    });
  const npm = async (args: string[], cwd: string) => {
    const result: ProcessResult = await runProcess("npm", args, { cwd });
    if (result.status !== 0) throw new Error(`npm ${args[0]} failed (${result.status}): ${result.stderr.slice(-2000)}`);
  };

  beforeAll(async () => {
    await npm(["pack", "--pack-destination", dir, "--silent"], repo);
    const tarball = fs.readdirSync(dir).find((name) => name.endsWith(".tgz"));
    fs.mkdirSync(project);
    fs.writeFileSync(
      path.join(project, "package.json"),
      JSON.stringify({ name: "consumer", private: true, type: "module" }),
    );
    const options = { strict: true, skipLibCheck: false, module: "nodenext", moduleResolution: "nodenext" };
    for (const [name, file] of [
      ["tsconfig.json", "index.ts"],
      ["tsconfig.bad.json", "bad.ts"],
    ]) {
      fs.writeFileSync(
        path.join(project, name!),
        JSON.stringify({
          compilerOptions: {
            ...options,
            target: "es2022",
            lib: ["es2022", "esnext.disposable"],
            types: ["node"],
            noEmit: true,
          },
          files: [file],
        }),
      );
    }
    fs.writeFileSync(path.join(project, "index.ts"), CONSUMER);
    // A wrapper that forwards its own optional options, under exactOptionalPropertyTypes: undefined
    // means "not given" at run time, and the types say so (review, session 27).
    fs.writeFileSync(
      path.join(project, "tsconfig.exact.json"),
      JSON.stringify({
        compilerOptions: {
          ...options,
          exactOptionalPropertyTypes: true,
          target: "es2022",
          types: ["node"],
          noEmit: true,
        },
        files: ["exact.ts"],
      }),
    );
    fs.writeFileSync(
      path.join(project, "exact.ts"),
      [
        'import { agent, ContainerPiAgent } from "sandbox-run";',
        "export async function review(cwd?: string, model?: string, models?: Record<string, unknown>, signal?: AbortSignal) {",
        "  const pool = new ContainerPiAgent({ model, models, onProgress: undefined });",
        "  await pool.close();",
        '  return agent("Review this change", { cwd, model, models, signal, sandbox: undefined });',
        "}",
        "",
      ].join("\n"),
    );
    // A CommonJS project beside it (no "type": "module"): the package is ESM only.
    const cjs = path.join(project, "cjs");
    fs.mkdirSync(cjs);
    fs.writeFileSync(path.join(cjs, "package.json"), JSON.stringify({ name: "cjs-consumer", private: true }));
    fs.writeFileSync(
      path.join(cjs, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { ...options, target: "es2022", types: ["node"], noEmit: true },
        files: ["x.ts"],
      }),
    );
    fs.writeFileSync(path.join(cjs, "x.ts"), 'import { agent } from "sandbox-run";\nexport const a = agent;\n');
    // One assertion turned wrong: tsc must refuse it.
    fs.writeFileSync(
      path.join(project, "bad.ts"),
      CONSUMER.replace(
        "expectType<Equal<typeof typed, Review>>(); // ASSERTION",
        "expectType<Equal<typeof typed, { verdict: string }>>();",
      ),
    );
    // Our own versions of TypeScript and Node's types; no install scripts (none are needed to type-check).
    await npm(
      [
        "install",
        "--no-audit",
        "--no-fund",
        "--ignore-scripts",
        "--prefer-offline",
        path.join(dir, tarball!),
        `typescript@${installed("typescript")}`,
        `@types/node@${installed("@types/node")}`,
      ],
      project,
    );
  }, 300_000);

  it("compiles with strict and skipLibCheck false: no types of our dev dependencies, results typed from the schema", async () => {
    const result = await tsc("tsconfig.json");
    expect(`${result.stdout}${result.stderr}`).toBe("");
    expect(result.status).toBe(0);
    // @types/dockerode is ours to develop with, not the consumer's: it must not be needed.
    expect(fs.existsSync(path.join(project, "node_modules/@types/dockerode"))).toBe(false);
  });

  it("a wrapper forwarding optional options compiles under exactOptionalPropertyTypes (review, session 27)", async () => {
    const result = await tsc("tsconfig.exact.json");
    expect(`${result.stdout}${result.stderr}`).toBe("");
    expect(result.status).toBe(0);
  });

  it("a wrong type assertion fails to compile (the type-level check can fail)", async () => {
    const result = await tsc("tsconfig.bad.json");
    expect(result.status).not.toBe(0);
    expect(result.stdout).toMatch(/bad\.ts\(\d+,\d+\): error TS2344/);
  });

  it("a CommonJS project is refused at compile time, not at run time (review, session 27: it compiled, then require() failed with ERR_PACKAGE_PATH_NOT_EXPORTED)", async () => {
    const result = await tsc("cjs/tsconfig.json");
    expect(result.status).not.toBe(0);
    expect(result.stdout).toMatch(/x\.ts\(1,\d+\): error TS\d+: .*sandbox-run/);
  });

  it("ships the LICENSE and the docs the README links to", () => {
    const pkg = path.join(project, "node_modules/sandbox-run");
    expect(fs.readFileSync(path.join(pkg, "LICENSE"), "utf8")).toMatch(/^MIT License/);
    const readme = fs.readFileSync(path.join(pkg, "README.md"), "utf8");
    const links = [...readme.matchAll(/\]\((docs\/[^)#]+)/g)].map((m) => m[1]!);
    expect(links.length).toBeGreaterThan(3);
    for (const link of links) expect(fs.existsSync(path.join(pkg, link)), link).toBe(true);
  });
});
