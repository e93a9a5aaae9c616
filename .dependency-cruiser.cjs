// The layers of src/, as rules CI checks (`npm run lint`). See docs/architecture.md for the picture.
//
//   leaf      agent.ts, errors.ts, sandbox-contract.ts, util/: shared types, constants and helpers;
//             they import nothing of ours but each other
//   parts     engine/ pi/ gateway/ proxy/ workspace/ workspace-transfer/ hand-back/ relay/ policy/ http/ image/
//             record/ replay/ scripted-model/ demo/
//   run       run/: one call from options to result, composed from the parts
//   warm      warm/: sandboxes made before any call and handed to runs (above run/, below the agent)
//   agent     container-pi-agent.ts, index.ts (and the public testing entry)
//   cli       cli/: a thin shell over the library
//   show/     (a part) a record as a page or a Markdown summary; reads records only, runs nothing
const PARTS =
  "^src/(engine|pi|gateway|proxy|workspace|workspace-transfer|hand-back|relay|policy|http|image|record|replay|scripted-model|demo|show)/";
const LEAF = "^src/((agent|errors|sandbox-contract)\.ts$|util/)";

module.exports = {
  forbidden: [
    { name: "no-circular", severity: "error", from: {}, to: { circular: true } },
    {
      name: "dockerode-only-in-engine",
      comment: "Only the engine seam talks to dockerode; everything else goes through the Engine interface.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/engine/" },
      to: { path: "node_modules/(dockerode|docker-modem|@types/dockerode)/" },
    },
    {
      name: "cli-uses-the-public-face",
      comment:
        "The CLI is a client of the library's public face: the operations (operations.ts), the types of index.ts, and the leaf.",
      severity: "error",
      from: { path: "^src/cli/" },
      to: { path: "^src/", pathNot: ["^src/cli/", "^src/(operations|index)\\.ts$", LEAF] },
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
        pathNot: [LEAF, "^src/(image/runner-image|run/plan/held-trees|run/record-outcome)\\.ts$"],
        dependencyTypesNot: ["type-only"],
        dynamic: false,
      },
    },
    {
      name: "library-never-imports-cli",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/cli/" },
      to: { path: "^src/cli/" },
    },
    {
      name: "leaf-imports-only-leaf",
      comment: "The shared contract stays a leaf, so every layer can depend on it.",
      severity: "error",
      from: { path: LEAF },
      to: { path: "^src/", pathNot: LEAF },
    },
    {
      name: "parts-never-import-run-or-agent",
      comment: "Data flows down: the parts know nothing of how a run composes them.",
      severity: "error",
      from: { path: PARTS },
      to: { path: "^src/(run/|container-pi-agent\\.ts|index\\.ts|testing\\.ts)" },
    },
    {
      name: "engine-is-infrastructure",
      comment: "engine/ knows containers, not Pi, policies, images, gateways or workspaces.",
      severity: "error",
      from: { path: "^src/engine/" },
      to: { path: "^src/", pathNot: ["^src/engine/", LEAF] },
    },
    {
      name: "pi-knows-only-pi",
      comment: "Only pi/ knows Pi's flags and event shapes; it depends on nothing but the leaf.",
      severity: "error",
      from: { path: "^src/pi/" },
      to: { path: "^src/", pathNot: ["^src/pi/", LEAF] },
    },
    {
      name: "proxy-and-gateway-stay-apart",
      severity: "error",
      from: { path: "^src/(proxy|gateway)/" },
      to: { path: "^src/(run|engine|image|workspace|record)/" },
    },
    {
      name: "show-reads-records-only",
      comment:
        "show/ turns a record (hostile input) into a page: it reads the record's format and nothing that runs, contacts or mounts anything (no engine, gateway, proxy, run or workspace code).",
      severity: "error",
      from: { path: "^src/show/" },
      to: {
        path: "^src/",
        pathNot: ["^src/show/", LEAF, "^src/record/record-format\\.ts$", "^src/replay/load-record\\.ts$"],
      },
    },
    {
      name: "only-the-show-operation-shows",
      comment: "The page is a view of a finished record: nothing of a run depends on it; `sandbox-run show` is operations/show-record.ts.",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/show/", "^src/operations/show-record\\.ts$"] },
      to: { path: "^src/show/" },
    },
    {
      name: "hand-back-knows-trees-not-sandboxes",
      comment:
        "hand-back/ turns a judged tree into a commit or a patch with the host's git: it knows trees (workspace-transfer/) and the patch format (record/), never containers, Pi, the relay or the model gateway.",
      severity: "error",
      from: { path: "^src/hand-back/" },
      to: { path: "^src/(engine|pi|gateway|proxy|relay|replay|image|policy|scripted-model|demo)/" },
    },
    {
      name: "run-never-imports-agent",
      severity: "error",
      from: { path: "^src/run/" },
      to: { path: "^src/(container-pi-agent|index|testing)\\.ts$" },
    },
    {
      name: "warm-pool-sits-above-run",
      comment:
        "warm/ keeps sandboxes made before any call and hands one to a run: it uses run/ and the parts; run/ and the parts only know the claimed sandbox's interface (run/warm-claim.ts).",
      severity: "error",
      from: { path: ["^src/run/", PARTS, LEAF] },
      to: { path: "^src/warm/" },
    },
    {
      name: "warm-pool-never-imports-agent",
      severity: "error",
      from: { path: "^src/warm/" },
      to: { path: "^src/(container-pi-agent|index|testing)\\.ts$" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsConfig: { fileName: "tsconfig.json" },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"] },
  },
};
