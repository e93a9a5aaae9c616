// In CI the workspace is usually the checkout of the change under review. A policy, models, schema,
// prompt or engines file (or a file an engines file names: its TLS files, ssh key, known_hosts,
// a unix socket) that lies inside it (or inside an extra writable root) is written by that change: it
// chooses its own boundary, and a `!command` in such a models.json would run on the host before any
// container exists. This finds such files so the run can warn, refuse (strict mode), and never run
// their commands.
import fs from "node:fs";
import path from "node:path";
import { enginesFilePath, tlsFilesIn } from "../../engine/engine-endpoint.js";
import { usageError } from "../../errors.js";
import { secretFilePath } from "../../proxy/secret-bindings.js";
import { readConfigFile } from "../../util/config-file.js";
import { atOrBelow } from "../../util/path-inside.js";

export interface ConfigFiles {
  policy?: string;
  models?: string;
  schema?: string;
  prompt?: string;
  engines?: string;
}

interface InsideFile {
  what: keyof ConfigFiles;
  file: string;
  /** The workspace or writable root it lies in. */
  root: string;
  /** The engines file that names it (a TLS file, a key, a socket), when it is not a config file itself. */
  namedBy?: string;
  /**
   * Named inside the tree, a link to this host file outside every tree: the tree chose which of the
   * host's files the run reads (review, session 35: a prompt file linked to /proc/self/environ sent
   * the host's provider key to the model and into the sandbox, unwarned even in strict mode).
   */
  leadsTo?: string;
  /** The link inside the tree it leads out through (the file itself, or a folder on its path). */
  through?: string;
}

/**
 * The config files that lie inside one of `roots` (all canonical paths): by the path as named (its
 * folder resolved) and by where it leads, as a policy's secret files are judged.
 */
export function configInsideRoots(files: ConfigFiles, roots: readonly string[]): InsideFile[] {
  const inside: InsideFile[] = [];
  for (const [what, file] of Object.entries(files) as Array<[keyof ConfigFiles, string | undefined]>) {
    if (!file) continue;
    const found = insideOrLeadingOut(file, roots);
    if (found) inside.push({ what, ...found });
  }
  if (files.engines) {
    // Whoever chooses these chooses which engine the run goes to (who answers as it), wherever the
    // engines file itself is.
    for (const named of enginesFileNames(files.engines)) {
      const found = insideOrLeadingOut(named, roots);
      if (found) inside.push({ what: "engines", ...found, namedBy: realOrResolved(files.engines) });
    }
  }
  return inside;
}

/**
 * Where `file` lies among `roots`: inside one (by where it leads), or named inside one and leading
 * out of every one, through a link at any step of its path at or below the root (the file itself,
 * or a folder on the way: review, session 35, `prompts/` linked to a host folder made
 * `prompts/task.md` the host's file, unwarned). Undefined when neither.
 */
function insideOrLeadingOut(
  file: string,
  roots: readonly string[],
): { file: string; root: string; leadsTo?: string; through?: string } | undefined {
  const real = realOrResolved(file);
  const root = roots.find((r) => atOrBelow(real, r));
  if (root) return { file: real, root };
  // Resolved one step at a time: the first step that is inside a root, followed by one whose link
  // leads out of every root, is a name inside that tree choosing a place outside it.
  const parts = path.resolve(file).split("/").filter(Boolean);
  let at = "/";
  let within: string | undefined;
  for (const part of parts) {
    const next = realOrResolved(path.join(at, part));
    const nextRoot = roots.find((r) => atOrBelow(next, r));
    if (within && !nextRoot)
      return { file: path.resolve(file), root: within, leadsTo: real, through: path.join(at, part) };
    within = nextRoot;
    at = next;
  }
  return undefined;
}

/**
 * A policy secret read from a file inside a tree the run mounts is refused, whatever the caller
 * allows: the sandbox reads the token there (and may swap the file, or a link to it, for the next
 * run's). Judged by the path as named (its folder resolved) and by where it leads.
 */
export function checkSecretFiles(
  secrets: Record<string, { from?: { env: string } | { file: string } }> | undefined,
  trees: readonly string[],
): void {
  for (const [name, secret] of Object.entries(secrets ?? {})) {
    const from = secret.from;
    if (!from || !("file" in from)) continue;
    const named = secretFilePath(from.file);
    const found = insideOrLeadingOut(named, trees);
    if (!found) continue;
    const asNamed = path.join(realOrResolved(path.dirname(named)), path.basename(named));
    const lies = found.leadsTo !== undefined || atOrBelow(asNamed, found.root);
    throw usageError(
      `The policy's secret ${name} is read from ${named}, which ${lies ? "lies" : "leads"} inside ${found.root}, a folder this run mounts in the sandbox: the sandbox could read the token, or change it for the next run.`,
      "Keep the token file outside the workspace, the writable directories and the read-only mounts (e.g. under ~/.config), or read it from an environment variable (from: { env: NAME }).",
    );
  }
}

/**
 * The files an engines file names, resolved as engines-file.ts resolves them; none when it cannot
 * be read (the pool reports that). Read without its schema: a plan loads no engine module and no zod.
 */
function enginesFileNames(file: string): string[] {
  let engines: unknown;
  try {
    engines = (readConfigFile(file, "engines", "") as { engines?: unknown })?.engines;
  } catch {
    return [];
  }
  if (!Array.isArray(engines)) return [];
  const text = (v: unknown): v is string => typeof v === "string" && v !== "";
  return engines.flatMap((engine: { host?: unknown; tls?: unknown; ssh?: Record<string, unknown> }) => {
    const named: string[] = [];
    if (text(engine?.host) && engine.host.startsWith("unix://")) named.push(engine.host.slice("unix://".length));
    const tls = engine?.tls;
    if (text(tls)) named.push(...Object.values(tlsFilesIn(enginesFilePath(file, tls))));
    else if (tls && typeof tls === "object")
      named.push(
        ...Object.values(tls)
          .filter(text)
          .map((p) => enginesFilePath(file, p)),
      );
    for (const key of ["privateKey", "knownHosts"]) {
      const value = engine?.ssh?.[key];
      if (text(value)) named.push(enginesFilePath(file, value));
    }
    return named;
  });
}

export function describeInside({ what, file, root, namedBy }: InsideFile): string {
  const chosen =
    what === "policy"
      ? "boundary (mounts, network, secrets)"
      : what === "engines"
        ? "engine"
        : what === "models"
          ? "models, and where your provider keys are sent"
          : what;
  const which = namedBy ? `the file ${file}, which the engines file ${namedBy} names,` : `the ${what} file ${file}`;
  return `${which} lies inside ${root}, which this run sandboxes: whoever can change that tree chooses this run's ${chosen}`;
}

/**
 * A config file named inside a sandboxed tree that is a link out of every tree is refused, allowed
 * or not: the tree picked a host file (an environment in /proc, a key under ~/.ssh) for the run to
 * read and hand to the model and the sandbox as its prompt, schema or configuration.
 */
export function refuseLinksOut(inside: readonly InsideFile[]): void {
  const out = inside.find((i) => i.leadsTo !== undefined);
  if (!out) return;
  throw usageError(
    `The ${out.what} file ${out.file} lies inside ${out.root}, which this run sandboxes, and leads out of it${out.through && out.through !== out.file ? ` through the link ${out.through}` : ""} to ${out.leadsTo}: whoever can change that tree chose which of this host's files the run reads.`,
    `Pass ${out.leadsTo} itself if it is the file you mean, or a file from a place the tree under test cannot change.`,
  );
}

/** Whether a parsed models.json holds a `!command` value anywhere (keys, headers, per model). */
export function modelsJsonHasCommands(value: unknown): boolean {
  if (typeof value === "string") return value.startsWith("!");
  if (Array.isArray(value)) return value.some(modelsJsonHasCommands);
  if (value && typeof value === "object") return Object.values(value).some(modelsJsonHasCommands);
  return false;
}

function realOrResolved(file: string): string {
  try {
    return fs.realpathSync(file);
  } catch {
    return path.resolve(file);
  }
}
