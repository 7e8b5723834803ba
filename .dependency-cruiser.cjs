// The layer rule of src/ (npm run lint): an import only ever points down this list, and nothing imports in a
// circle. Revisions of the protocol do not import each other.
//
//   composition   src/gateway.ts, src/cli.ts          builds the parts in dependency order
//   http          src/http/                           fastify wiring
//   protocol      src/protocol/rev<revision>/         codec, router, task methods of one revision
//   gateway       src/gateway/                        sessions, catalog and lists, replica links
//   tasks         src/tasks/                          the era-neutral task core
//   upstream      src/upstream/                       connections to the MCP servers behind the gateway
//   store         src/store/                          memory and Redis
//   config        src/config/, src/log.ts
//   base          src/jsonrpc.ts, src/errors.ts, src/version.ts, src/protocol/mcp.ts (what is true of MCP itself)
const LAYERS = [
  ['base', '^src/(jsonrpc|errors|version)\\.ts$|^src/protocol/mcp\\.ts$'],
  ['config', '^src/config/|^src/log\\.ts$'],
  ['store', '^src/store/'],
  ['upstream', '^src/upstream/'],
  ['tasks', '^src/tasks/'],
  ['gateway', '^src/gateway/'],
  ['protocol', '^src/protocol/rev'],
  ['http', '^src/http/'],
  ['composition', '^src/(gateway|cli)\\.ts$'],
];

const layerRules = LAYERS.slice(0, -1).map(([name, path], i) => ({
  name: `layer-${name}`,
  comment: `${name} may import only from the layers below it`,
  severity: 'error',
  from: { path },
  to: { path: LAYERS.slice(i + 1).map(([, above]) => `(${above})`).join('|') },
}));

module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'revisions-apart',
      comment: 'one protocol revision does not import another; what both need lives below them',
      severity: 'error',
      from: { path: '^src/protocol/(rev[^/]+)/' },
      to: { path: '^src/protocol/rev[^/]+/', pathNot: '^src/protocol/$1/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    includeOnly: '^src/',
  },
};
