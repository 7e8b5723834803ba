// The layer rule of src/ (npm run lint): an import only ever points down this list, and nothing imports in a
// circle. Revisions of the protocol do not import each other. The order is ../shared/DESIGN.md's, with the
// layers it leaves implicit named: what a revision needs from the gateway above it is an interface it declares
// (protocol/ports.ts, and rev2025-11-25/session.ts and StatelessPeers, which protocol/revision-ports.ts re-exports),
// implemented by the gateway and passed in.
//
//   composition   src/taskgate.ts, src/cli.ts,        builds the parts in dependency order and starts them
//                 src/compose/                        with one lifecycle (its builders, and what it needs around them: src/compose/);
//                 src/workers*.ts                     as one process, or a group of workers sharing the port
//   revisions     src/protocol/revision(s).ts,        the revision registry and its entries: each entry serves
//                 src/protocol/rev*/revision.ts       its revision (router, task methods, front) from shared parts
//                                                     and brings its codec and upstream side; every list of
//                                                     revisions derives from the registry and is handed down
//   http          src/http/, src/protocol/rev*/http/  fastify wiring, each revision's front in its own folder
//   gateway       src/gateway/                        sessions, catalog and lists, upstream→client, replica links
//   protocol      src/protocol/ (but codecs)          one folder per revision (router, task methods, error
//                                                     edge), and what both share (ports, task tools, routing)
//   webhooks      src/webhooks/                       task and approval events delivered to operators' endpoints
//                                                     (issue 34): queued in the store, hearing the event seam
//   streams       src/streams/                        a client's open response streams: SSE writing, event
//                                                     buffers bounded per stream and in total, keep-alive
//   tasks         src/tasks/                          the era-neutral task core (which imports no protocol/ at all)
//   upstream      src/protocol/rev*/upstream/         each revision's upstream side (handshake or discovery,
//   sides                                             catalog, calls, the upstream's own tasks): built on
//                                                     src/upstream/, which never imports them
//   upstream      src/upstream/                       connections to the MCP servers behind the gateway, in three
//                                                     rooms, each importing only the ones below it: life/ (one
//                                                     upstream's connections, reconnects, per-principal children),
//                                                     peer/ (one connection as an MCP peer, and the contract a
//                                                     revision's side implements: adapter.ts), transports/ (bytes
//                                                     in and out: stdio, Streamable HTTP, HTTP+SSE, bounded readers)
//   wire          src/protocol/rev*/codec.ts,         each revision's wire codec: every field name of that
//                 src/protocol/wire-codec.ts          revision, for the gateway as server and as client; the
//                                                     contract (WireCodec) every codec implements
//   consent       src/consent/                        per-user connections to upstreams that need each user's own
//                                                     authorization (issue 41): links, flows, sealed tokens and their
//                                                     refresh, over the store; identity/ declares the port it serves
//   store         src/store/                          memory and Redis
//   observability src/observability/                  subscribers of the event seam (audit log, metrics, traces):
//                                                     they know the events and the config, never the core
//   identity      src/identity/                       the gateway's credentials toward upstreams (issue 33): token
//                                                     caches, OAuth client, signer, sealer; built from config alone
//   config        src/config/, src/log.ts
//   base          src/jsonrpc.ts, src/errors.ts, src/version.ts, src/events.ts (the event seam), src/lifecycle.ts
//                 (start in order, stop in reverse), src/mcp.ts (what is true of MCP itself: versions, method and
//                 field tables, which the upstream side needs too), src/principals.ts (the caller model: who owns
//                 a task, a session, a rate window, which every layer may name)
const LAYERS = [
  ['base', '^src/(jsonrpc|errors|version|events|lifecycle|mcp|principals)\\.ts$'],
  ['config', '^src/config/|^src/log\\.ts$'],
  ['identity', '^src/identity/'],
  ['observability', '^src/observability/'],
  ['store', '^src/store/'],
  ['consent', '^src/consent/'],
  ['wire', '^src/protocol/rev[^/]+/codec\\.ts$|^src/protocol/wire-codec\\.ts$'],
  ['upstream', '^src/upstream/'],
  ['upstream-sides', '^src/protocol/rev[^/]+/upstream/'],
  ['streams', '^src/streams/'],
  ['tasks', '^src/tasks/'],
  ['webhooks', '^src/webhooks/'],
  ['protocol', '^src/protocol/(?!wire-codec\\.ts$|revisions?\\.ts$|rev[^/]+/(codec\\.ts|revision\\.ts|http/|upstream/))'],
  ['gateway', '^src/gateway/'],
  ['http', '^src/http/|^src/protocol/rev[^/]+/http/'],
  ['revisions', '^src/protocol/revisions?\\.ts$|^src/protocol/rev[^/]+/revision\\.ts$'],
  ['composition', '^src/(taskgate|cli|workers|workers-primary)\\.ts$|^src/compose/'],
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
      name: 'registry-only',
      comment:
        'outside src/protocol/, no file names a revision: the gateway reaches them through the registry (revisions.ts, which the ' +
        'composition root reads and hands down) and their ports through revision-ports.ts; a third revision edits no file out there',
      severity: 'error',
      from: { path: '^src/(?!protocol/)' },
      to: { path: '^src/protocol/rev[^/]+/' },
    },
    {
      name: 'registry-only-in-protocol',
      comment:
        "what src/protocol/ shares between revisions names none of them, but for the registries and the ports' re-export; a revision's " +
        'codec excepted (what is true of every revision may read each one\'s wire)',
      severity: 'error',
      from: { path: '^src/protocol/[^/]+\\.ts$', pathNot: '^src/protocol/(revisions|revision-ports)\\.ts$' },
      to: { path: '^src/protocol/rev[^/]+/', pathNot: '^src/protocol/rev[^/]+/codec\\.ts$' },
    },
    ...[
      ['transports', '^src/upstream/(peer|life)/'],
      ['peer', '^src/upstream/life/'],
    ].map(([room, above]) => ({
      name: 'upstream-rooms',
      comment: "src/upstream/'s rooms import only downward: life/ over peer/ over transports/",
      severity: 'error',
      from: { path: `^src/upstream/${room}/` },
      to: { path: above },
    })),
    {
      name: 'tasks-era-neutral',
      comment: 'the task core knows no revision: what is era-specific reaches it through the interfaces it declares',
      severity: 'error',
      from: { path: '^src/tasks/' },
      to: { path: '^src/protocol/' },
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
