// The engines file (`--engines <file>` / SANDBOX_RUN_ENGINES): the engines runs may go to, how to
// reach each and how many runs each takes at once. JSON, or YAML when named *.yaml / *.yml; every
// mistake is reported as a `path: message` line, like policy files. Relative paths in it (TLS
// files, ssh keys) are relative to the file, so a folder with the file and its certificates can
// be moved as one.
import { usageError } from "../errors.js";
import { formatZodIssues, readConfigFile } from "../util/config-file.js";
import { lazily, z } from "../util/zod.js";
import {
  DEFAULT_SOCKET,
  type EngineEndpoint,
  enginesFilePath,
  isLoopbackHost,
  sharesHostFilesystemByDefault,
  type TlsFiles,
  tlsFilesIn,
} from "./engine-endpoint.js";

/** The file's schemas, built on first use (zod loads only with an engines file). */
function buildSchemas() {
  const tlsFilesSchema = z
    .object({
      ca: z.string().min(1).describe("PEM file of the CA that signed the engine's certificate"),
      cert: z.string().min(1).describe("PEM file of this client's certificate"),
      key: z.string().min(1).describe("PEM file of this client's private key"),
    })
    .strict();

  const sshSchema = z
    .object({
      privateKey: z.string().min(1).optional().describe("private key file (default: the ssh agent, then ~/.ssh/id_*)"),
      hostKey: z
        .string()
        .regex(/^[a-z0-9@.-]+ [A-Za-z0-9+/]+=*( .*)?$/, 'a public key line, like "ssh-ed25519 AAAA..."')
        .optional()
        .describe("the machine's public host key; without it, knownHosts (default ~/.ssh/known_hosts) is read"),
      knownHosts: z.string().min(1).optional().describe("a known_hosts file to find the host key in"),
      socket: z
        .string()
        .startsWith("/", "an absolute path on the engine's machine")
        .optional()
        .describe(`the engine's socket on that machine (default ${DEFAULT_SOCKET}; Podman: /run/podman/podman.sock)`),
    })
    .strict();

  const engineSchema = z
    .object({
      name: z
        .string()
        .regex(
          /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/,
          "letters, digits, '.', '_' and '-', starting with a letter or digit",
        )
        .describe("how messages, events and `doctor` name the engine"),
      host: z
        .string()
        .regex(/^(unix|tcp|ssh):\/\/\S+$/, "unix:///path, tcp://host:port or ssh://user@host[:port]")
        .describe("where the engine is, as in DOCKER_HOST"),
      tls: z
        .union([z.string().min(1), tlsFilesSchema])
        .optional()
        .describe("mutual TLS for tcp://: a folder with ca.pem, cert.pem and key.pem, or the three files"),
      ssh: sshSchema.optional().describe("how to log in for ssh://"),
      capacity: z
        .number()
        .int("a whole number")
        .min(0)
        .max(1000)
        .describe("runs at once on this engine; 0 keeps it out of scheduling (an image source only)"),
      runtimes: z
        .array(z.enum(["runc", "runsc"]))
        .min(1)
        .optional()
        .describe("runtimes runs may use here (default: what the engine registers)"),
      sharesHostFilesystem: z
        .boolean()
        .optional()
        .describe(
          "whether this machine's paths are the engine's (bind mounts work); default true only for unix:// and tcp:// to loopback",
        ),
    })
    .strict()
    .superRefine((engine, ctx) => {
      const scheme = engine.host.slice(0, engine.host.indexOf(":"));
      if (engine.tls && scheme !== "tcp")
        ctx.addIssue({ code: "custom", path: ["tls"], message: "only for tcp:// engines" });
      if (engine.ssh && scheme !== "ssh")
        ctx.addIssue({ code: "custom", path: ["ssh"], message: "only for ssh:// engines" });
      if (scheme === "tcp" && !engine.tls) {
        const host = hostOf(engine.host);
        if (host !== undefined && !isLoopbackHost(host))
          ctx.addIssue({
            code: "custom",
            path: ["tls"],
            message: "required for tcp:// to another machine (plain tcp gives anyone on the network root there)",
          });
      }
      if (scheme === "ssh" && !/^ssh:\/\/[^@/]+@/.test(engine.host))
        ctx.addIssue({ code: "custom", path: ["host"], message: "name the user: ssh://user@host" });
    });

  const enginesFileSchema = z
    .object({
      engines: z.array(engineSchema).min(1, "list at least one engine"),
    })
    .strict()
    .superRefine((file, ctx) => {
      const seen = new Set<string>();
      file.engines.forEach((engine, i) => {
        if (seen.has(engine.name))
          ctx.addIssue({ code: "custom", path: ["engines", i, "name"], message: `"${engine.name}" is used twice` });
        seen.add(engine.name);
      });
      if (file.engines.every((engine) => engine.capacity === 0))
        ctx.addIssue({ code: "custom", path: ["engines"], message: "at least one engine needs a capacity above 0" });
    });
  return { engineSchema, enginesFileSchema };
}
const schemas = lazily(buildSchemas);
type EngineSchemaEntry = z.infer<ReturnType<typeof buildSchemas>["engineSchema"]>;

export interface EngineEntry {
  name: string;
  endpoint: EngineEndpoint;
  capacity: number;
  runtimes?: Array<"runc" | "runsc">;
  sharesHostFilesystem: boolean;
}

/** Reads, validates and resolves an engines file. */
export function loadEnginesFile(file: string): EngineEntry[] {
  const value = readConfigFile(
    file,
    "engines",
    "Pass --engines (or SANDBOX_RUN_ENGINES) the path of a JSON or YAML engines file.",
  );
  return parseEnginesFile(value, file);
}

export function parseEnginesFile(value: unknown, file: string): EngineEntry[] {
  const parsed = schemas().enginesFileSchema.safeParse(value);
  if (!parsed.success) {
    throw usageError(
      `Engines file ${file} is invalid:\n${formatZodIssues(parsed.error.issues)}`,
      'Fix the fields above; each engine needs a name, a host (unix://, tcp:// with tls, or ssh://user@host) and a capacity, e.g. {"engines":[{"name":"local","host":"unix:///var/run/docker.sock","capacity":4}]}.',
    );
  }
  return parsed.data.engines.map((engine) => {
    const endpoint = endpointOf(engine, file);
    return {
      name: engine.name,
      endpoint,
      capacity: engine.capacity,
      ...(engine.runtimes ? { runtimes: engine.runtimes } : {}),
      sharesHostFilesystem: engine.sharesHostFilesystem ?? sharesHostFilesystemByDefault(endpoint),
    };
  });
}

function endpointOf(engine: EngineSchemaEntry, file: string): EngineEndpoint {
  const resolve = (p: string) => enginesFilePath(file, p);
  if (engine.host.startsWith("unix://")) return { kind: "unix", socketPath: engine.host.slice("unix://".length) };
  const url = new URL(engine.host);
  const host = url.hostname;
  if (url.protocol === "ssh:") {
    const ssh = engine.ssh ?? {};
    return {
      kind: "ssh",
      host,
      port: Number(url.port || 22),
      socketPath: ssh.socket ?? DEFAULT_SOCKET,
      ssh: {
        user: decodeURIComponent(url.username),
        ...(ssh.privateKey ? { privateKeyFile: resolve(ssh.privateKey) } : {}),
        ...(ssh.hostKey ? { hostKey: ssh.hostKey } : {}),
        ...(ssh.knownHosts ? { knownHostsFile: resolve(ssh.knownHosts) } : {}),
      },
    };
  }
  let tls: TlsFiles | undefined;
  if (typeof engine.tls === "string") tls = tlsFilesIn(resolve(engine.tls));
  else if (engine.tls)
    tls = { ca: resolve(engine.tls.ca), cert: resolve(engine.tls.cert), key: resolve(engine.tls.key) };
  return { kind: "tcp", host, port: Number(url.port || (tls ? 2376 : 2375)), ...(tls ? { tls } : {}) };
}

function hostOf(address: string): string | undefined {
  try {
    return new URL(address).hostname;
  } catch {
    return undefined;
  }
}
