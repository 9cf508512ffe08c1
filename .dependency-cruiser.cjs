// The architecture as rules (npm run lint): the folders of src/ form layers, and a folder may import
// only from its own layer or the layers below it, so there is no import cycle between folders (nor,
// by `no-circular`, between files; `no-circular-folders` checks every folder, subfolders too).
// Tests are left out: a test may reach anywhere it needs.
//
//   app.ts, main.ts      the composition root: wires everything, imported by nothing
//   root/                the composition root's parts (the Slack app and its HTTP routes), imported by app.ts only
//   sim/, playground/    local stand-ins and the playground: tools beside the bot
//   adapters/            Slack handlers and Block Kit builders, the crew client, HTTP routes
//   metrics/             Prometheus figures: a leaf, listening to the use cases' telemetry events
//   outbox/              the worker that performs Slack effects through the use cases' ports
//   usecases/            the rules; the outside world only through ports (usecases/ports.ts)
//   store/               the only code that touches the database
//   domain/              pure rules: states, transitions, approvals, the outbox's vocabulary
//   protocols/           the crew's and flows' wire formats: types, parsers, errors, signatures
//   log/, config/        logging; configuration parsed once
//   text/, crypto/       small pure helpers
const LAYERS = [
  ["text", "crypto"],
  ["log", "config"],
  ["protocols"],
  ["domain"],
  ["store"],
  ["usecases"],
  ["outbox"],
  ["metrics"],
  ["adapters"],
  ["sim", "playground"],
];
const folders = (names) => `^src/(${names.join("|")})/`;
const NOT_TESTS = "\\.test\\.ts$";

const layerRules = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `layer-${layer.join("-")}`,
  comment: `${layer.join(", ")} may not import from a layer above it (${LAYERS.slice(i + 1).flat().join(", ")}) nor from the composition root`,
  severity: "error",
  from: { path: folders(layer), pathNot: NOT_TESTS },
  to: { path: [folders(LAYERS.slice(i + 1).flat()), "^src/(app|main)\\.ts$"] },
}));

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "no import cycles between files",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-circular-folders",
      comment: "no import cycles between folders (between sibling folders; a folder and its subfolders are kept apart by the rules below)",
      severity: "error",
      scope: "folder",
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    {
      name: "composition-root",
      comment: "only tests and the process entry import app.ts; nothing imports main.ts",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/main\\.ts$", NOT_TESTS] },
      to: { path: "^src/(app|main)\\.ts$" },
    },
    {
      name: "metrics-leaf",
      comment: "metrics listens (usecases/telemetry.ts) and is wired by the composition root: nothing else imports it, so use cases, the outbox and adapters emit without knowing who listens",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/app\\.ts$", "^src/metrics/", NOT_TESTS] },
      to: { path: "^src/metrics/" },
    },
    {
      name: "metrics-listens",
      comment: "metrics reads the use cases' and the outbox's types only: it calls none of them",
      severity: "error",
      from: { path: "^src/metrics/", pathNot: NOT_TESTS },
      to: { path: "^src/(usecases|outbox|adapters)/", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "composition-root-parts",
      comment: "root/ holds parts of the composition root: only app.ts imports them",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/app\\.ts$", "^src/root/", NOT_TESTS] },
      to: { path: "^src/root/" },
    },
    {
      name: "database-in-store",
      comment: "the store is the only code that touches the database (the Prisma client, Kysely, the drivers)",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/store/", NOT_TESTS] },
      to: { path: ["^src/generated/prisma/", "^node_modules/(kysely|pg|@electric-sql/pglite|@prisma/client|@prisma/adapter-pg|pglite-prisma-adapter)/"], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "no-prisma-client-at-run-time",
      comment: "the bot queries through Kysely only and never loads Prisma's client (its types are fine; tests use it through test/support/prisma.ts)",
      severity: "error",
      from: { path: "^src/", pathNot: [NOT_TESTS] },
      to: { path: ["^src/generated/prisma/", "^node_modules/@prisma/client/"], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "handlers-through-use-cases",
      comment: "Slack handlers reach the database through use cases, not the store (the installation store Bolt asks for is the one persistence adapter)",
      severity: "error",
      from: { path: "^src/adapters/", pathNot: ["^src/adapters/slack/installations\\.ts$", NOT_TESTS] },
      to: { path: "^src/store/", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "pure-block-builders",
      comment: "Block Kit builders are pure: they import no handler, client, store, use case or outbox",
      severity: "error",
      from: { path: "^src/adapters/slack/blocks/", pathNot: NOT_TESTS },
      to: { path: ["^src/adapters/slack/(?!blocks/)", "^src/(store|usecases|outbox|metrics)/"], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "slack-base-below-features",
      comment:
        "the Slack adapter's shared files (deps, access, clients, notifier, guard, installs) do not import its features (review/, flows/, kickoff/, home/), which import them: no cycle between a folder and its subfolders",
      severity: "error",
      from: { path: "^src/adapters/slack/[^/]+\\.ts$" },
      to: { path: "^src/adapters/slack/(review|flows|kickoff|home)/" },
    },
    {
      name: "store-db-below-store",
      comment: "store/db (the connection, migrations, the driver runner) does not import the store's modules, which use it",
      severity: "error",
      from: { path: "^src/store/db/" },
      to: { path: "^src/store/[^/]+\\.ts$" },
    },
    {
      name: "adapters-apart",
      comment: "the HTTP routes and the crew client do not import the Slack adapter (it may import them)",
      severity: "error",
      from: { path: "^src/adapters/(http|crew)/", pathNot: NOT_TESTS },
      to: { path: "^src/adapters/slack/" },
    },
  ],
  options: {
    // Tests may reach anywhere they need: they are left out of the graph.
    exclude: { path: NOT_TESTS },
    // generated code (the Prisma client, the store's table types) is seen as a leaf, never walked
    doNotFollow: { path: ["node_modules", "^src/generated/"] },
    // folder-scope rules (no-circular-folders) are checked on the folder graph, which metrics build
    metrics: true,
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"], extensions: [".ts", ".js", ".mjs", ".cjs", ".json"] },
  },
};
