// A policy says what one run may touch: mounts, tools, network, limits, runtime.
// Every field is described so `sandbox-run policy show` and error messages can explain it.
import { z } from "zod";
import { globProblem } from "../workspace/path-glob.js";

const domainPattern = z
  .string()
  .min(1)
  .describe("An exact host name (registry.npmjs.org) or a *.suffix pattern (*.npmjs.org)")
  // The shape check accepts *.com so the breadth check below is the one that explains it.
  .refine((d) => /^(\*\.[a-z0-9-]+(\.[a-z0-9-]+)*|[a-z0-9-]+(\.[a-z0-9-]+)+)$/i.test(d), {
    message: "must be a host name like registry.npmjs.org or a pattern like *.npmjs.org",
  })
  .refine((d) => !d.startsWith("*.") || d.slice(2).split(".").length >= 2, {
    message: "is too broad: a *.suffix pattern needs at least two labels after '*.' (use *.example.com, not *.com)",
  });

export const limitsSchema = z
  .object({
    memoryMb: z.number().int().min(64).describe("Memory limit of the container in MiB (swap included)"),
    cpus: z.number().positive().max(256).describe("CPU limit, in cores (fractions allowed)"),
    pids: z.number().int().min(16).describe("Maximum number of processes and threads in the container"),
    tmpMb: z.number().int().min(1).describe("Size of the /tmp tmpfs in MiB (Pi's bash logs land here)"),
    homeMb: z.number().int().min(1).describe("Size of the home directory tmpfs in MiB (Pi's config dir)"),
    timeoutSeconds: z.number().positive().describe("Wall-clock limit for the whole run, in seconds"),
    maxOutputMb: z
      .number()
      .positive()
      .describe("Maximum bytes the sandbox may write to stdout (the event stream) and stderr together, in MiB"),
    maxLineMb: z.number().positive().describe("Maximum size of one JSONL event line, in MiB"),
  })
  .strict();

export const policySchema = z
  .object({
    name: z.string().min(1).describe("Policy name, shown in run records"),
    description: z.string().optional().describe("What the policy is for"),
    workspace: z.enum(["read-only", "read-write"]).describe("How the workspace (cwd) is mounted"),
    writableRoots: z.boolean().describe("Whether additionalWritableDirectories are allowed (mounted read-write)"),
    readOnlyMounts: z
      .array(z.string().min(1))
      .default([])
      .describe("Extra host directories mounted read-only at the same path"),
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
    runtime: z.enum(["runc", "runsc"]).describe("Container runtime: runc (shared kernel) or runsc (gVisor)"),
    workspaceMode: z
      .enum(["bind", "copy"])
      .optional()
      .describe(
        "How the workspace reaches the sandbox: bind (mounted; local engines' default) or copy (copied into a tmpfs and the changes checked, then copied back; no host path inside; forced on an engine that does not share this host's filesystem)",
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
    if (p.workspace === "read-only" && (p.tools.includes("edit") || p.tools.includes("write"))) {
      ctx.addIssue({ code: "custom", path: ["tools"], message: "edit/write make no sense on a read-only workspace" });
    }
  });

export type Policy = z.infer<typeof policySchema>;
export type Limits = z.infer<typeof limitsSchema>;
