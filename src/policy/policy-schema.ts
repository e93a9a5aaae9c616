// A policy says what one run may touch: mounts, tools, network, limits, runtime.
// Every field is described so `sandbox-run policy show` and error messages can explain it.
// Built on first use (util/zod.ts): a run with a built-in policy never loads zod for it.
import { MAX_TIMEOUT_SECONDS } from "../sandbox-contract.js";
import { hostPatternProblem, matchesDomain } from "../util/host-pattern.js";
import { RUNNER_PLATFORMS, type RunnerPlatform } from "../util/platform.js";
import { lazily, z } from "../util/zod.js";
import { BUILTIN_PROTECTION_NAMES } from "../workspace/builtin-protections.js";
import { globProblem } from "../workspace/path-glob.js";

/**
 * The default turn budget. SWE-bench-style repository tasks are run with a step limit of 250
 * (mini-swe-agent's swebench config) and strong models finish most of them well inside it; a real
 * turn takes seconds, so within the default 15-minute timeout few runs reach 250 at all. A broken
 * model answering in milliseconds (4,369 turns in 15 minutes) stops after 250 instead.
 */
const DEFAULT_MAX_TURNS = 250;
/**
 * The default output cap per model response: Pi asks for the model's maximum (16k-128k for its
 * built-in models, 262k for some), an agent's reply is rarely more than a few thousand tokens, and
 * 32,000 leaves room for a long file written in one tool call or a long reasoning phase.
 */
export const DEFAULT_MAX_OUTPUT_TOKENS = 32_000;
/** Anthropic needs a thinking budget of at least 1,024 tokens below max_tokens. */
const MIN_OUTPUT_TOKENS = 2048;
/** The default entry limit: copy mode's cap on a returned tree before it became a policy field. */
const DEFAULT_MAX_ENTRIES = 200_000;
/**
 * The largest size a limit may name, 1 TiB in MiB: the engine takes bytes as a 64-bit integer (1e20
 * MiB is none), and no sandbox needs more.
 */
const MAX_MB = 1024 * 1024;
/** Linux's largest pid_max: more processes than a kernel can number. */
const MAX_PIDS = 4_194_304;
/** One event line is one string in the controller; V8's strings end below 512 MiB. */
const MAX_LINE_MB = 256;
const TOO_BIG = {
  mb: `is more than 1 TiB (${MAX_MB} MiB)`,
  pids: `is more than a Linux kernel can number (pid_max ${MAX_PIDS})`,
  line: `is more than ${MAX_LINE_MB} MiB, past what one line in the controller may be`,
  timeout: `is longer than a run may last (${MAX_TIMEOUT_SECONDS} seconds, a day)`,
};

/** The policy's zod schemas, built on first use. */
export const policySchemas = lazily(buildPolicySchemas);

function buildPolicySchemas() {
  // One rule for what an entry may be, shared with the proxy that applies it (util/host-pattern.ts):
  // no empty labels, at most 253 characters, no wildcard over IP literals (*.0.0.1), no *.com.
  const domainPattern = z
    .string()
    .min(1)
    .describe("An exact host name (registry.npmjs.org) or a *.suffix pattern (*.npmjs.org)")
    .superRefine((d, ctx) => {
      const problem = hostPatternProblem(d, { wildcard: true });
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    });

  // Secrets (issue 14): a credential the agent may use but never hold. The sandbox sees a per-run
  // placeholder in the variable; the egress proxy swaps it for the value, read on the host, in
  // the request headers named here, on TLS connections to the listed hosts only.
  const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
  /** Variables sandbox-run sets inside the sandbox (or that steer its TLS, proxy and git set-up). */
  const RESERVED_SECRET_NAME =
    /^(SANDBOX_RUN_.*|PI_.*|NODE_.*|GIT_CONFIG_.*|HOME|TMPDIR|LANG|PATH|.*_PROXY|SSL_CERT_FILE|GIT_SSL_CAINFO|CURL_CA_BUNDLE|REQUESTS_CA_BUNDLE)$/i;
  const exactHost = z
    .string()
    .describe("An exact host name")
    .superRefine((host, ctx) => {
      const problem = hostPatternProblem(host, { wildcard: false });
      if (problem) ctx.addIssue({ code: "custom", message: problem });
      else if (/^[0-9.]+$/.test(host)) ctx.addIssue({ code: "custom", message: "must be a host name, not an address" });
    });
  const headerName = z
    .string()
    .regex(/^[A-Za-z0-9-]{1,64}$/, "must be an HTTP header name such as X-Api-Key")
    .refine((h) => !/^(host|content-length|transfer-encoding|connection|keep-alive|upgrade|te|trailer)$/i.test(h), {
      message: "is a header the proxy manages itself",
    });

  const secretSchema = z
    .object({
      hosts: z
        .array(exactHost)
        .min(1)
        .describe("Hosts the value may be sent to: exact names, each also in allowedDomains; HTTPS on port 443 only"),
      inject: z
        .array(z.union([z.enum(["bearer", "basic"]), z.object({ header: headerName }).strict()]))
        .min(1)
        .describe(
          'Where the placeholder is replaced: "bearer" (Authorization: Bearer or token <placeholder>), "basic" (inside the base64 user:password of Authorization: Basic, as git sends it), or { "header": "X-Api-Key" }',
        ),
      from: z
        .union([
          z.object({ env: z.string().regex(SECRET_NAME, "must be an environment variable name") }).strict(),
          z.object({ file: z.string().regex(/^(\/|~\/)/, "must be an absolute path (or start with ~/)") }).strict(),
        ])
        .optional()
        .describe(
          "Where the host reads the value: { env: NAME } (default: the host variable named like the secret) or { file: /absolute/path }; never the policy itself",
        ),
      username: z
        .string()
        .regex(/^[^\s:]{1,64}$/, "must be a user name without spaces or ':'")
        .optional()
        .describe('User name git\'s credential helper answers with for "basic" (default x-access-token)'),
    })
    .strict();

  const limitsSchema = z
    .object({
      memoryMb: z
        .number()
        .int()
        .min(64)
        .max(MAX_MB, TOO_BIG.mb)
        .describe(
          "Memory limit of the container in MiB (swap included); in copy mode the container gets the copied trees' size on top (their tmpfs counts as memory): the sandbox may use this much plus that size, whatever for, and files the run adds to the trees count against it",
        ),
      cpus: z
        .number()
        .min(0.01, "must be at least 0.01 (the least Docker gives a container)")
        .max(256)
        .describe("CPU limit, in cores (fractions allowed; at most the engine's own CPUs are given)"),
      pids: z
        .number()
        .int()
        .min(16)
        .max(MAX_PIDS, TOO_BIG.pids)
        .describe("Maximum number of processes and threads in the container"),
      tmpMb: z
        .number()
        .int()
        .min(1)
        .max(MAX_MB, TOO_BIG.mb)
        .describe("Size of the /tmp tmpfs in MiB (Pi's bash logs land here)"),
      homeMb: z
        .number()
        .int()
        .min(1)
        .max(MAX_MB, TOO_BIG.mb)
        .describe("Size of the home directory tmpfs in MiB (Pi's config dir)"),
      timeoutSeconds: z
        .number()
        .positive()
        .max(MAX_TIMEOUT_SECONDS, TOO_BIG.timeout)
        .describe("Wall-clock limit for the whole run, in seconds"),
      maxOutputMb: z
        .number()
        .positive()
        .max(MAX_MB, TOO_BIG.mb)
        .describe("Maximum bytes the sandbox may write to stdout (the event stream) and stderr together, in MiB"),
      maxLineMb: z
        .number()
        .positive()
        .max(MAX_LINE_MB, TOO_BIG.line)
        .describe(
          "Maximum size of one JSONL event line, in MiB (Pi's events carry the prompt whole: a prompt over half of it is refused)",
        ),
      diskMb: z
        .number()
        .int()
        .min(1)
        .max(MAX_MB, TOO_BIG.mb)
        .describe(
          "Disk the sandbox may add to the workspace and extra writable roots together, in MiB; also the largest file any process in the sandbox may write",
        ),
      // Issue 17 part 6: the limits below have defaults, so policy files written before them still load.
      maxEntries: z
        .number()
        .int()
        .min(1)
        .default(DEFAULT_MAX_ENTRIES)
        .describe(
          "Files and folders the run may add to the workspace and extra writable roots together (net: created minus removed); counted while the run is live (inode use, then an exact count) and exactly after it. In copy mode each writable tree may come back with at most this many more entries than were copied in",
        ),
      maxTurns: z
        .number()
        .int()
        .min(1)
        .default(DEFAULT_MAX_TURNS)
        .describe(
          "Model responses the run may ask for, counted by the host-side gateway (also requests the sandbox sends itself); --max-turns / maxTurns override it for one run",
        ),
      maxOutputTokens: z
        .number()
        .int()
        .min(MIN_OUTPUT_TOKENS)
        .default(DEFAULT_MAX_OUTPUT_TOKENS)
        .describe(
          "Output tokens one model response may use: the gateway lowers a larger max_tokens (max_completion_tokens, max_output_tokens, maxOutputTokens) to this, and sets it where a request names none",
        ),
    })
    .strict();

  const policySchema = z
    .object({
      name: z.string().min(1).describe("Policy name, shown in run records"),
      description: z.string().optional().describe("What the policy is for"),
      workspace: z.enum(["read-only", "read-write"]).describe("How the workspace (cwd) is mounted"),
      writableRoots: z.boolean().describe("Whether additionalWritableDirectories are allowed (mounted read-write)"),
      readOnlyMounts: z
        // Absolute: a relative entry would be read from wherever sandbox-run runs, often the workspace.
        .array(
          z
            .string()
            .regex(
              /^\//,
              "must be an absolute path (such as /opt/cache); a relative one would be read from the current folder",
            ),
        )
        .default([])
        .describe(
          "Extra host directories, by absolute path, mounted read-only at the same path (never the home folder or one holding it, `/root`, `/etc`, `/run`, the engine's state: a sandbox could read keys there, or connect to a socket)",
        ),
      tools: z
        .array(z.enum(["read", "bash", "edit", "write", "grep", "find", "ls"]))
        .min(1)
        .describe("Pi's built-in tools the agent gets"),
      network: z
        .enum(["none", "allowlist", "open"])
        .describe(
          "none: only the model gateway; allowlist: plus an HTTP(S) proxy to allowedDomains; open: bridge network",
        ),
      allowedDomains: z
        .array(domainPattern)
        .default([])
        .describe(
          "Hosts the egress proxy lets the sandbox reach in allowlist mode, on ports 80 and 443 (DNS is resolved on the host; private and loopback addresses are refused)",
        ),
      trustHostCaBundle: z
        .boolean()
        .default(false)
        .describe(
          "Mount the host's CA bundle (/etc/ssl/certs/ca-certificates.crt) read-only and point NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, GIT_SSL_CAINFO, CURL_CA_BUNDLE and REQUESTS_CA_BUNDLE at it: needed for HTTPS where a TLS-inspecting proxy sits between the host and the internet",
        ),
      secrets: z
        .record(z.string(), secretSchema)
        .superRefine((secrets, ctx) => {
          for (const name of Object.keys(secrets)) {
            if (!SECRET_NAME.test(name))
              ctx.addIssue({ code: "custom", path: [name], message: "must be an environment variable name" });
            else if (RESERVED_SECRET_NAME.test(name))
              ctx.addIssue({ code: "custom", path: [name], message: "is a variable sandbox-run sets itself" });
          }
        })
        .optional()
        .describe(
          "Credentials by variable name: inside the sandbox the variable holds a per-run placeholder, and the egress proxy puts the host-side value into requests to the listed hosts only (network allowlist)",
        ),
      runtime: z.enum(["runc", "runsc"]).describe("Container runtime: runc (shared kernel) or runsc (gVisor)"),
      workspaceMode: z
        .enum(["bind", "copy"])
        .optional()
        .describe(
          "How the workspace reaches the sandbox: bind (mounted; local engines' default) or copy (copied into a tmpfs and the changes checked, then copied back; no host path inside; forced on an engine that does not share this host's filesystem)",
        ),
      handBack: z
        .enum(["apply", "branch", "patch"])
        .optional()
        .describe(
          "What becomes of the workspace's changes once they passed the checks: apply (the default: written into the working tree), branch (committed by the host's own git, hooks and filters off, onto a new branch sandbox-run/<run-id> parented on the HEAD the run started from; the working tree and .git are never written by the sandbox) or patch (only a patch file; nothing else is written). branch and patch run in copy mode; no effect on a read-only workspace",
        ),
      platform: z
        .enum(RUNNER_PLATFORMS as [RunnerPlatform, ...RunnerPlatform[]])
        .optional()
        .describe(
          "Platform the sandbox runs on: linux/amd64 or linux/arm64 (the runner image of that platform; on another platform than the engine's own, under its emulator, runc only); --platform and SANDBOX_RUN_PLATFORM override it; default: the engine's own",
        ),
      image: z
        .string()
        .regex(/^[a-z0-9][a-z0-9._/:@-]*$/, "must be an image reference such as sandbox-run/pi-apt:<tag>")
        .optional()
        .describe(
          "Runner image for runs with this policy, one built FROM the runner image (e.g. by `sandbox-run image build --apt`); --image overrides it; default: this version's runner image",
        ),
      contextFiles: z
        .boolean()
        .describe("Load AGENTS.md/CLAUDE.md from the workspace (a prompt-injection vector in untrusted repos)"),
      protectedPaths: z
        .array(
          z.string().superRefine((glob, ctx) => {
            const problem = globProblem(glob);
            if (problem) ctx.addIssue({ code: "custom", message: problem });
          }),
        )
        .default([])
        .describe(
          "Workspace globs (relative; ** any depth, * and ? within a name) whose creation, modification or deletion fails the run; existing <dir>/** directories and existing files named without wildcards are also mounted read-only",
        ),
      disableBuiltinProtections: z
        .array(
          z.string().refine((name) => BUILTIN_PROTECTION_NAMES.includes(name), {
            message: `must be one of ${BUILTIN_PROTECTION_NAMES.join(", ")}`,
          }),
        )
        .default([])
        .describe(
          "Built-in protections of writable trees to turn off, each by its name (see docs/security.md): git-metadata, git-entry-kinds, git-modes, git-pointers, git-objects, git-refs, git-config-paths, new-repositories, directory-modes, or a protected name such as .envrc, .vscode/ or .husky/. They apply at any depth, case-insensitively; a violation fails the run and is put back",
        ),
      limits: limitsSchema,
    })
    .strict()
    .superRefine((p, ctx) => {
      if (p.network !== "allowlist" && p.allowedDomains.length > 0) {
        ctx.addIssue({ code: "custom", path: ["allowedDomains"], message: 'is only used with network "allowlist"' });
      }
      if (p.network === "allowlist" && p.allowedDomains.length === 0) {
        ctx.addIssue({
          code: "custom",
          path: ["allowedDomains"],
          message: 'is empty: network "allowlist" needs at least one domain (or use "none")',
        });
      }
      for (const [name, secret] of Object.entries(p.secrets ?? {})) {
        if (p.network !== "allowlist") {
          ctx.addIssue({ code: "custom", path: ["secrets", name], message: 'needs network "allowlist"' });
          continue;
        }
        secret.hosts.forEach((host, i) => {
          const malformed = hostPatternProblem(host, { wildcard: false }) !== undefined; // reported already
          if (!malformed && !p.allowedDomains.some((pattern) => matchesDomain(host, pattern))) {
            ctx.addIssue({ code: "custom", path: ["secrets", name, "hosts", i], message: "is not in allowedDomains" });
          }
        });
      }
      if (p.handBack && p.handBack !== "apply" && p.workspaceMode === "bind") {
        ctx.addIssue({
          code: "custom",
          path: ["handBack"],
          message: `"${p.handBack}" needs copy mode (the sandbox must never hold the working tree): drop workspaceMode "bind"`,
        });
      }
      if (p.workspace === "read-only" && (p.tools.includes("edit") || p.tools.includes("write"))) {
        ctx.addIssue({ code: "custom", path: ["tools"], message: "edit/write make no sense on a read-only workspace" });
      }
    });

  return { policySchema, limitsSchema, secretSchema };
}

type PolicySchemas = ReturnType<typeof buildPolicySchemas>;
export type Policy = z.infer<PolicySchemas["policySchema"]>;
export type Limits = z.infer<PolicySchemas["limitsSchema"]>;
