// The layers of src/, as rules CI checks (`npm run lint`). See docs/architecture.md for the picture.
//
//   leaf      agent.ts, errors.ts, sandbox-contract.ts, util/: shared types, constants and helpers;
//             they import nothing of ours but each other
//   parts     engine/ pi/ gateway/ proxy/ workspace/ workspace-transfer/ hand-back/ relay/ policy/ http/ image/
//             record/ replay/ scripted-model/ demo/ show/
//   run       run/: one call from options to result, composed from the parts (run/plan/: pure planning)
//   warm      warm/: sandboxes made before any call and handed to runs (above run/, below the agent)
//   agent     container-pi-agent.ts, index.ts, testing.ts, and the operations face (operations.ts, operations/)
//   cli       cli/: a thin shell over the operations face
//
// What each part (and the leaf) knows nothing of is not written here: it is read from the table in
// docs/architecture.md, one rule per row (knowsNothingOf below), so the document and the checks
// cannot say different things.
const fs = require("node:fs");
const path = require("node:path");

const PARTS =
  "^src/(engine|pi|gateway|proxy|workspace|workspace-transfer|hand-back|relay|policy|http|image|record|replay|scripted-model|demo|show)/";
/** Everything above the parts: a run, the warm pool, the agent and the public face. */
const ABOVE_THE_PARTS = "^src/(run/|warm/|operations/|(container-pi-agent|index|testing|operations)\\.ts$)";

/** A path of the table (`util/`, `sandbox-contract.ts`, `record/record-format.ts`) as a pattern under src/. */
function srcPattern(token) {
  const escaped = token.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return token.endsWith("/") ? `^src/${escaped}` : `^src/${escaped}$`;
}

/** The backticked paths of a table cell, leaving out what it says in parentheses (that is for people). */
function pathsOf(cell) {
  let text = cell;
  for (let previous = ""; previous !== text; ) {
    previous = text;
    text = text.replace(/\([^()]*\)/g, "");
  }
  return [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
}

/**
 * The "knows nothing of" table of docs/architecture.md as rules. A row's first cell names the
 * folders (or files) it is about; its last cell is either "everything but `x/`, `y.ts` and the
 * leaf" (they may import only themselves, those and the leaf) or a list of what they may not import.
 * The row that starts "the leaf:" defines the leaf. A table that cannot be read stops the lint.
 */
function knowsNothingOf(file) {
  const text = fs.readFileSync(file, "utf8");
  const header = text.indexOf("| folder | owns | knows nothing of |");
  if (header < 0) throw new Error(`${file}: no "| folder | owns | knows nothing of |" table`);
  const lines = text.slice(header).split("\n").slice(2);
  const end = lines.findIndex((line) => !line.startsWith("|"));
  const rows = lines.slice(0, end < 0 ? undefined : end).map((line) => line.split(" | "));
  const leafRow = rows.find((cells) => cells[0].startsWith("| the leaf:"));
  if (!leafRow) throw new Error(`${file}: the table has no row "the leaf: ..."`);
  const leaf = pathsOf(leafRow[0]).map(srcPattern);
  const rules = rows.map((cells) => {
    const from = pathsOf(cells[0]);
    const cell = cells.at(-1).replace(/ \|$/, "");
    const named = pathsOf(cell);
    if (from.length === 0) throw new Error(`${file}: a row of the table names no folder: ${cells[0]}`);
    const name = `knows-nothing-of:${from.join(",")}`;
    const comment = `docs/architecture.md: ${from.join(", ")} knows nothing of ${cell}`;
    if (cell.startsWith("everything but")) {
      if (!/(and )?the leaf\b/.test(cell.replace(/\([^()]*\)/g, ""))) {
        throw new Error(`${file}: "${cell}" must end "and the leaf" (every layer may use the leaf)`);
      }
      return {
        name,
        comment,
        severity: "error",
        from: { path: from.map(srcPattern) },
        to: { path: "^src/", pathNot: [...from, ...named].map(srcPattern).concat(leaf) },
      };
    }
    if (named.length === 0) throw new Error(`${file}: the row of ${from.join(", ")} forbids nothing: ${cell}`);
    return { name, comment, severity: "error", from: { path: from.map(srcPattern) }, to: { path: named.map(srcPattern) } };
  });
  return { leaf, rules };
}

const TABLE = knowsNothingOf(path.join(__dirname, "docs", "architecture.md"));
const LEAF = TABLE.leaf;

module.exports = {
  forbidden: [
    { name: "no-circular", severity: "error", from: {}, to: { circular: true } },
    ...TABLE.rules,
    {
      name: "dockerode-only-in-engine",
      comment: "Only the engine seam talks to dockerode; everything else goes through the Engine interface.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/engine/" },
      to: { path: "node_modules/(dockerode|docker-modem|@types/dockerode)/" },
    },
    {
      name: "parts-never-import-what-is-above-them",
      comment: "Data flows down: the parts know nothing of how a run, the warm pool or the agent composes them.",
      severity: "error",
      from: { path: PARTS },
      to: { path: ABOVE_THE_PARTS },
    },
    {
      name: "plan-starts-nothing",
      comment:
        "run/plan/ is pure planning (what --dry-run prints): it may read the parts' types and pure rules, never an engine, a server, a relay session, a record or a warm sandbox.",
      severity: "error",
      from: { path: "^src/run/plan/" },
      to: {
        path: [
          "^src/(engine|image|record|warm|workspace-transfer|hand-back|show|scripted-model|demo|http)/",
          "^src/gateway/(model-gateway|request-handler|forward-request)\\.ts$",
          "^src/proxy/(egress-proxy|tunnel|tls-terminator|secret-interception|upstream-client)\\.ts$",
          "^src/relay/relay-session\\.ts$",
          "^src/replay/replay-server\\.ts$",
          "^src/run/(execute-run|supervise-run|run-services|run-workspace)\\.ts$",
        ],
        // Where an engine is (its address, an engines file's paths): pure rules, no client.
        pathNot: "^src/engine/engine-endpoint\\.ts$",
        dependencyTypesNot: ["type-only"],
      },
    },
    {
      name: "run-never-imports-the-agent",
      comment: "A run knows a claimed warm sandbox only by run/warm-claim.ts, and nothing of the agent or the public face.",
      severity: "error",
      from: { path: "^src/run/" },
      to: { path: "^src/(warm/|operations/|(container-pi-agent|index|testing|operations)\\.ts$)" },
    },
    {
      name: "warm-pool-never-imports-agent",
      severity: "error",
      from: { path: "^src/warm/" },
      to: { path: "^src/(operations/|(container-pi-agent|index|testing|operations)\\.ts$)" },
    },
    {
      name: "library-never-imports-cli",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/cli/" },
      to: { path: "^src/cli/" },
    },
    {
      name: "cli-uses-the-public-face",
      comment:
        "The CLI is a client of the library's public face: the operations (operations.ts), the types of index.ts, and the leaf.",
      severity: "error",
      from: { path: "^src/cli/" },
      to: { path: "^src/", pathNot: ["^src/cli/", "^src/(operations|index)\\.ts$", ...LEAF] },
    },
    {
      name: "cli-takes-only-types-from-index",
      comment: "index.ts loads the whole library; the CLI loads what a command needs through operations.ts.",
      severity: "error",
      from: { path: "^src/cli/" },
      to: { path: "^src/index\\.ts$", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "operations-face-stays-light",
      comment:
        "Every CLI call loads operations.ts first: it imports types, the leaf and a few small pure modules; the rest it loads with import() when an operation runs.",
      severity: "error",
      from: { path: "^src/operations\\.ts$" },
      to: {
        path: "^src/",
        pathNot: [...LEAF, "^src/(image/runner-image|run/plan/held-trees|run/record-outcome)\\.ts$"],
        dependencyTypesNot: ["type-only"],
        dynamic: false,
      },
    },
    {
      name: "only-the-show-operation-shows",
      comment:
        "The page is a view of a finished record: nothing of a run depends on it; `sandbox-run show` is operations/show-record.ts.",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/show/", "^src/operations/show-record\\.ts$"] },
      to: { path: "^src/show/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsConfig: { fileName: "tsconfig.json" },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"] },
  },
};
