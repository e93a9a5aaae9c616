// pi-schema's own answers for the two checks where Ajv and pi-schema decided differently (review,
// session 31): the host's result check (result-validator.ts) asks these, so that a value Pi accepted
// is not refused by the host for a format or multipleOf reading of its own, a run failing with code
// "validation" and no retry.
//
// - Formats: pi-schema's checks themselves (`@earendil-works/pi-schema/formats`, the release Pi
//   bundles: the dependency is pinned to Pi's version), for every format pi-schema knows. ajv-formats
//   and pi-schema disagree on many (`admin@localhost`, `"quoted"@example.com` and `user@[127.0.0.1]`
//   are emails to pi-schema, not to ajv-formats; idn-hostname, iri, ...).
// - multipleOf: pi-schema decides it exactly on the numbers' decimal digits (19.99 is a multiple of
//   0.01); Ajv divides in floating point (19.99 / 0.01 is 1998.9999999999998). pi-schema does not
//   export that check (its package exports only "." and "./formats"): isPiMultiple below decides
//   the same, and a unit test holds the two to the same answers on many values.
//
// pi-schema is an ES module only (its exports have no "require" condition), and the host's check is
// synchronous: the formats are loaded by `loadPiSchemaFormats` (awaited by checkPiAcceptsSchema,
// which every run and --dry-run awaits before any result is checked), or, where that has not
// happened, with require() of the ES module (Node 20.19+, 22.12+). Nothing here loads pi-schema
// before a format check runs: planning a call without a schema never loads it (cli-start-up test).
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

type FormatCheck = (value: string) => boolean;
type Formats = Readonly<Record<string, FormatCheck>>;

/**
 * The formats pi-schema 1.6.0 checks, by name (the keys of its `formats`): the host registers its
 * checks under these names before pi-schema is loaded. A unit test compares them with the package's.
 */
export const PI_SCHEMA_FORMAT_NAMES: readonly string[] = [
  "date",
  "date-time",
  "duration",
  "email",
  "hostname",
  "idn-email",
  "idn-hostname",
  "ipv4",
  "ipv6",
  "iri",
  "iri-reference",
  "json-pointer",
  "json-pointer-uri-fragment",
  "regex",
  "relative-json-pointer",
  "time",
  "uri",
  "uri-reference",
  "uri-template",
  "url",
  "uuid",
];

const PACKAGE = "@earendil-works/pi-schema";
let loaded: Formats | undefined;

/** Loads pi-schema's format checks (once); a format check of the host's never runs without them. */
export async function loadPiSchemaFormats(): Promise<void> {
  loaded ??= (await import("@earendil-works/pi-schema/formats")).formats;
}

function formatsNow(): Formats {
  if (loaded) return loaded;
  try {
    const require = createRequire(import.meta.url);
    loaded = (require(formatsModulePath(require)) as { formats: Formats }).formats;
    return loaded;
  } catch (error) {
    throw new Error(
      `pi-schema's format checks are not loaded (await loadPiSchemaFormats() before a result is checked): ${(error as Error).message}`,
    );
  }
}

/**
 * The file `@earendil-works/pi-schema/formats` names for an import, found synchronously: require's
 * resolution cannot (the package's exports have only an "import" condition), import.meta.resolve is
 * not there under every runner (vitest's): the package as Node's lookup finds it, then its exports.
 */
function formatsModulePath(require: NodeJS.Require): string {
  for (const folder of require.resolve.paths(PACKAGE) ?? []) {
    const root = path.join(folder, PACKAGE);
    const manifest = path.join(root, "package.json");
    if (!fs.existsSync(manifest)) continue;
    const { exports } = JSON.parse(fs.readFileSync(manifest, "utf8")) as {
      exports?: Record<string, { import?: string } | undefined>;
    };
    const target = exports?.["./formats"]?.import;
    if (typeof target !== "string") throw new Error(`${manifest} exports no "./formats" for import`);
    return path.join(root, target);
  }
  throw new Error(`${PACKAGE} is not installed`);
}

/** pi-schema's check of the format `name`, loaded when it first runs. */
export function piSchemaFormat(name: string): FormatCheck {
  let check: FormatCheck | undefined;
  return (value) => {
    check ??= formatsNow()[name];
    if (!check) throw new Error(`pi-schema has no format "${name}"`);
    return check(value);
  };
}

/**
 * Whether `value` is a multiple of `divisor` as pi-schema 1.6.0 decides it: a whole quotient is one;
 * otherwise, where the quotient is finite, exactly, on the two numbers' decimal forms (0.0075 /
 * 0.0001 is 74.99999999999999 in floating point, and 0.0075 is a multiple); an infinite quotient (a
 * huge value over a tiny divisor) is judged by `%`. Our own arithmetic, held to pi-schema's answers
 * on many values by tests/unit/run-result-validator-agreement.test.ts (pi-schema exports no check).
 */
export function isPiMultiple(value: number, divisor: number): boolean {
  const quotient = value / divisor;
  if (Number.isInteger(quotient)) return true;
  if (!Number.isFinite(quotient)) return value % divisor === 0;
  const v = exactDecimal(value);
  const d = exactDecimal(divisor);
  // Both as whole numbers of the smaller power of ten, then divided as integers.
  const unit = Math.min(v.exponent, d.exponent);
  const whole = (x: { digits: bigint; exponent: number }) => x.digits * 10n ** BigInt(x.exponent - unit);
  const by = whole(d);
  return by !== 0n && whole(v) % by === 0n;
}

/** A finite number's shortest round-trip form as digits × 10^exponent: 19.99 is 1999 × 10^-2, 3e-8 is 3 × 10^-8. */
function exactDecimal(x: number): { digits: bigint; exponent: number } {
  const parts = /^(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(Math.abs(x).toString());
  if (!parts) return { digits: 0n, exponent: 0 };
  const fraction = parts[2] ?? "";
  return { digits: BigInt(`${parts[1]}${fraction}`), exponent: Number(parts[3] ?? 0) - fraction.length };
}
