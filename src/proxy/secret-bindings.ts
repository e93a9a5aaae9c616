// A policy's secrets made concrete for one run: each value read on the host (environment or
// file, never the policy), a fresh placeholder the sandbox gets instead, and the canonical
// hosts it may go to. Nothing here is ever written into the sandbox but the placeholders.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { usageError } from "../errors.js";
import { canonicalHost } from "../util/host-name.js";

/**
 * A secret as the proxy takes it: where its value comes from, the hosts it may go to, and where a
 * request carries it. Structurally a policy's `secrets` entry (the policy's schema checks that
 * entry; the proxy knows nothing of policies).
 */
export interface ProxySecret {
  hosts: readonly string[];
  inject: ReadonlyArray<"bearer" | "basic" | { header: string }>;
  /** Default: the host variable named like the secret. */
  from?: { env: string } | { file: string };
  /** User name git's credential helper answers with for "basic" (default x-access-token). */
  username?: string;
}

type InjectRule = { kind: "bearer" } | { kind: "basic" } | { kind: "header"; header: string };

export interface SecretBinding {
  /** The variable name, also the secret's name in events and plans. */
  name: string;
  /** Canonical host names the value may be sent to. */
  hosts: readonly string[];
  inject: readonly InjectRule[];
  /** What the sandbox holds instead of the value: unique per run. */
  placeholder: string;
  /** The real value. Lives in the host controller's memory only. */
  value: string;
  /** User name git's credential helper gives with "basic". */
  username: string;
}

/** Shorter values would make response scrubbing rewrite ordinary text. */
const MIN_SECRET_LENGTH = 8;
const MAX_SECRET_LENGTH = 8192;

/** Where a secret's value comes from, in words (for errors, doctor and --dry-run). */
function secretSource(name: string, secret: ProxySecret): string {
  const from = secret.from ?? { env: name };
  return "env" in from ? `host variable ${from.env}` : `file ${from.file}`;
}

export function newPlaceholder(name: string): string {
  return `sandbox-run-placeholder-${name}-${crypto.randomBytes(16).toString("hex")}`;
}

/**
 * Reads every secret's value. A missing or unusable value is a usage error before anything
 * starts: a run that would silently go without its credential fails later and less clearly.
 */
export function resolveSecretBindings(
  secrets: Record<string, ProxySecret> | undefined,
  env: Record<string, string | undefined>,
  placeholders: Record<string, string> = {},
): SecretBinding[] {
  return Object.entries(secrets ?? {}).map(([name, secret]) => ({
    name,
    hosts: secret.hosts.map((h) => canonicalHost(h).host ?? h),
    inject: secret.inject.map(
      (rule): InjectRule => (typeof rule === "string" ? { kind: rule } : { kind: "header", header: rule.header }),
    ),
    placeholder: placeholders[name] ?? newPlaceholder(name),
    value: readSecretValue(name, secret, env),
    username: secret.username ?? "x-access-token",
  }));
}

/** The host file a secret's `from.file` names (`~/` is the caller's home). */
export function secretFilePath(file: string): string {
  return file.startsWith("~/") ? path.join(os.homedir(), file.slice(2)) : file;
}

function readSecretValue(name: string, secret: ProxySecret, env: Record<string, string | undefined>): string {
  const from = secret.from ?? { env: name };
  const where = secretSource(name, secret);
  let value: string | undefined;
  if ("env" in from) {
    value = env[from.env];
    if (value === undefined || value === "") {
      throw usageError(
        `The policy's secret ${name} needs a value, but the ${where} is not set.`,
        `Set ${from.env} in the environment that runs sandbox-run (it stays on the host; the sandbox gets a placeholder), or remove the secret from the policy.`,
      );
    }
  } else {
    const file = secretFilePath(from.file);
    try {
      value = fs.readFileSync(file, "utf8").replace(/\r?\n$/, "");
    } catch (error) {
      throw usageError(
        `The policy's secret ${name} is read from ${file}, which cannot be read (${(error as NodeJS.ErrnoException).code}).`,
        "Create the file with the token as its only content, readable by the user that runs sandbox-run.",
      );
    }
  }
  // The value goes into a header line verbatim (bearer, named header): no control characters,
  // and long enough that scrubbing it from responses cannot hit ordinary text.
  if (!/^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(value) || value.length > MAX_SECRET_LENGTH) {
    throw usageError(
      `The value of secret ${name} (${where}) is not a token: it must be printable ASCII without line breaks or surrounding spaces, at most ${MAX_SECRET_LENGTH} characters.`,
      "Check the variable or file holds just the token.",
    );
  }
  if (value.length < MIN_SECRET_LENGTH) {
    throw usageError(
      `The value of secret ${name} (${where}) is shorter than ${MIN_SECRET_LENGTH} characters.`,
      "Use the real token: responses are scrubbed of the value, which needs a value that cannot occur by chance.",
    );
  }
  return value;
}

interface SecretSummary {
  name: string;
  hosts: string[];
  inject: string[];
  /** Where the value is read, in words. */
  source: string;
  /** Why the value cannot be used (missing, not a token), or undefined when it can. */
  problem?: string;
}

/** Each secret by name, hosts and source, with whether its value is usable: never the value. */
export function summarizeSecrets(
  secrets: Record<string, ProxySecret> | undefined,
  env: Record<string, string | undefined>,
): SecretSummary[] {
  return Object.entries(secrets ?? {}).map(([name, secret]) => {
    let problem: string | undefined;
    try {
      readSecretValue(name, secret, env);
    } catch (error) {
      problem = (error as Error & { shortMessage?: string }).shortMessage ?? (error as Error).message;
    }
    return {
      name,
      hosts: [...secret.hosts],
      inject: secret.inject.map((rule) => (typeof rule === "string" ? rule : `header ${rule.header}`)),
      source: secretSource(name, secret),
      ...(problem ? { problem } : {}),
    };
  });
}
