// The Helm chart's values, described once: each value's default, JSON Schema type and description. From this
// scripts/chart-doc.ts writes charts/taskgate/values.yaml, values.schema.json and the value table of the chart's
// README, so the three cannot drift apart. Names marked "contract" are the ones issue 42 fixes (used from outside).

export type JsonSchema = Record<string, unknown>;

export interface ValueLeaf {
  doc: string;
  default: unknown;
  schema: JsonSchema;
}
export interface ValueGroup {
  doc: string;
  children: Record<string, ValueNode>;
}
export type ValueNode = ValueLeaf | ValueGroup;

export const isGroup = (node: ValueNode): node is ValueGroup => 'children' in node;

const leaf = (doc: string, def: unknown, schema: JsonSchema): ValueLeaf => ({ doc, default: def, schema });
const str = (doc: string, def = '', extra: JsonSchema = {}) => leaf(doc, def, { type: 'string', ...extra });
const int = (doc: string, def: number | null, minimum = 0) =>
  leaf(doc, def, def === null ? { type: ['integer', 'null'], minimum } : { type: 'integer', minimum });
const bool = (doc: string, def: boolean) => leaf(doc, def, { type: 'boolean' });
/** A map of strings (labels, annotations, selectors). */
const strings = (doc: string, def: Record<string, string> = {}) =>
  leaf(doc, def, { type: 'object', additionalProperties: { type: 'string' } });
/** A Kubernetes object passed through as it is (affinity, resources, ...): the API server validates its inside. */
const k8sObject = (doc: string, def: Record<string, unknown> = {}) => leaf(doc, def, { type: 'object' });
const k8sList = (doc: string, def: unknown[] = []) => leaf(doc, def, { type: 'array', items: { type: 'object' } });
const group = (doc: string, children: Record<string, ValueNode>): ValueGroup => ({ doc, children });
const secretRef = (doc: string) =>
  group(doc, {
    secretName: str('The Secret\'s name; empty: the chart\'s own Secret (a `secretEnv` entry).'),
    secretKey: str('The key in that Secret; empty: this is off.'),
  });
const probe = (doc: string, period: number, failures: number) =>
  group(doc, {
    periodSeconds: int('How often to probe.', period, 1),
    timeoutSeconds: int('How long one probe may take.', 3, 1),
    failureThreshold: int('Failures in a row before the kubelet acts.', failures, 1),
  });
const ENV_NAME = '^[A-Za-z_][A-Za-z0-9_]*$';

export const CHART_VALUES: Record<string, ValueNode> = {
  replicaCount: int('Gateway replicas (contract). Ignored with `autoscaling.enabled`. All share the Redis store.', 2, 1),
  image: group('The taskgate image (contract).', {
    repository: str('Image repository: the image built from the repository\'s Dockerfile, pushed where your cluster pulls from.', 'taskgate', { minLength: 1 }),
    tag: str('Image tag; empty: the chart\'s `appVersion` (the taskgate version).'),
    pullPolicy: str('Image pull policy.', 'IfNotPresent', { enum: ['Always', 'IfNotPresent', 'Never'] }),
  }),
  imagePullSecrets: k8sList('Secrets for pulling the image, `[{ name: regcred }]`.'),
  nameOverride: str('Replaces the chart name in object names.'),
  fullnameOverride: str('Replaces the whole `<release>-<chart>` object name prefix.'),
  clusterDomain: str('The cluster\'s DNS domain, for the Service names the gateway accepts in the Host header.', 'cluster.local', { minLength: 1 }),
  config: leaf(
    `The taskgate configuration (contract): YAML as in docs/configuration.md, deep-merged over what the chart renders
    (listen on 0.0.0.0:8080 with the Host names below, the Redis store from \`redis.*\`, \`log.level: info\`,
    \`replicas.drainTimeoutMs: 20000\`, \`shutdownTimeoutMs: 25000\`); lists replace, maps merge. \`upstreams\` is
    required. Secrets only as \`\${VAR}\` references (see \`secretEnv\`): a literal at a secret's place fails the
    render.`,
    {},
    { type: 'object' },
  ),
  allowedHosts: leaf('More Host names the gateway accepts, beside the Service\'s names, the Pod IP and the ingress and route hosts.', [], {
    type: 'array',
    items: { type: 'string', pattern: '^[^\\s/@]+$' },
  }),
  redis: group('The Redis store (contract: `url`, `existingSecret`, `existingSecretKey`). External Redis: one server, Sentinel or Cluster.', {
    mode: str('`standalone` (one server, `url`), `sentinel` or `cluster`.', 'standalone', { enum: ['standalone', 'sentinel', 'cluster'] }),
    url: str(
      `The server's URL, \`redis://[user:password@]host:port[/db]\` or \`rediss://\` for TLS (standalone); the chart puts it in
      its Secret. Or use \`existingSecret\`.`,
      '',
      { pattern: '^(rediss?://.+)?$' },
    ),
    existingSecret: str('A Secret of yours holding the URL (standalone) and the password (`existingSecretPasswordKey`, Sentinel or Cluster).'),
    existingSecretKey: str('The URL\'s key in `existingSecret`.', 'redis-url', { minLength: 1 }),
    existingSecretPasswordKey: str('The password\'s key in `existingSecret` (Sentinel or Cluster); empty: no password.', ''),
    password: str('Password for the Sentinel primary or the Cluster nodes; the chart puts it in its Secret.'),
    username: str('Username for the Sentinel primary or the Cluster nodes (ACL).'),
    tls: bool('TLS to the Sentinel primary or the Cluster nodes (`rediss://` node URLs turn it on to those nodes).', false),
    sentinel: group('Sentinel (`mode: sentinel`); the sentinels\' own password: `config.store.sentinel.sentinelPassword: ${VAR}`.', {
      name: str('The primary\'s name as the sentinels monitor it.'),
      nodes: leaf('The sentinels, `redis://host:26379` (`rediss://` for TLS).', [], { type: 'array', items: { type: 'string', pattern: '^rediss?://' } }),
    }),
    cluster: group('Cluster (`mode: cluster`).', {
      nodes: leaf('Any of the cluster\'s nodes, `redis://host:6379`; the rest are discovered.', [], { type: 'array', items: { type: 'string', pattern: '^rediss?://' } }),
    }),
    prefix: str('Prefix of every key; releases sharing a Redis keep apart by it.', 'taskgate', { minLength: 1 }),
  }),
  secretEnv: leaf(
    `Secrets as environment variables (name: value) in a Secret the chart creates, for \`\${NAME}\` in \`config\`: API
    keys, OAuth client secrets, identity keys, webhook secrets, upstream tokens. An empty or placeholder value fails
    the render.`,
    {},
    { type: 'object', propertyNames: { pattern: ENV_NAME }, additionalProperties: { type: 'string' } },
  ),
  extraEnv: k8sList('More container env entries, e.g. `{ name: API_KEY, valueFrom: { secretKeyRef: { name: my-secret, key: api-key } } }`.'),
  extraEnvFrom: k8sList('Whole Secrets or ConfigMaps as env, e.g. `[{ secretRef: { name: taskgate-secrets } }]`.'),
  caCertsSecret: group('Extra CA certificates (PEM) trusted for Redis, upstreams and issuers (`NODE_EXTRA_CA_CERTS`).', {
    name: str('The Secret holding them; empty: none.'),
    key: str('The key in that Secret.', 'ca.crt', { minLength: 1 }),
  }),
  serviceAccount: group('The pods\' ServiceAccount; its token is never mounted (the gateway does not talk to the API server).', {
    create: bool('Create one for the release.', true),
    name: str('Its name; empty: the release\'s full name (or `default` when not created).'),
    annotations: strings('Its annotations.'),
  }),
  podAnnotations: strings('Annotations of the pods.'),
  podLabels: strings('More labels of the pods.'),
  podSecurityContext: k8sObject('The pod security context (restricted Pod Security Standard; the image\'s `node` user is uid 1000).', {
    runAsNonRoot: true,
    runAsUser: 1000,
    runAsGroup: 1000,
    fsGroup: 1000,
    seccompProfile: { type: 'RuntimeDefault' },
  }),
  securityContext: k8sObject('The container security context.', {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  }),
  shareProcessNamespace: bool('Pause is PID 1 and reaps what stdio upstreams leave behind (the image has no init).', true),
  tmpSizeLimit: str('Size limit of the writable emptyDir at /tmp (also HOME, so npx\'s cache fits).', '1Gi', { minLength: 1 }),
  extraVolumes: k8sList('More pod volumes (e.g. a writable cache for a stdio upstream).'),
  extraVolumeMounts: k8sList('More container volume mounts.'),
  service: group('The Service in front of the pods.', {
    type: str('Service type.', 'ClusterIP', { enum: ['ClusterIP', 'NodePort', 'LoadBalancer'] }),
    port: int('The MCP port (named `http`).', 8080, 1),
    metricsPort: int('The Service port named `metrics` (the same container port; the ServiceMonitor scrapes it).', 9090, 1),
    annotations: strings('Annotations of the Service.'),
  }),
  preStopSleepSeconds: int('Seconds the pod waits before SIGTERM, so endpoints stop sending to it first; 0: no preStop.', 5),
  terminationGracePeriodSeconds: int('Grace before SIGKILL; empty: `preStopSleepSeconds` + `shutdownTimeoutMs` (rounded up) + 5.', null, 1),
  probes: group('Probe timings (startup and liveness on `/healthz`, readiness on `/readyz`).', {
    startup: probe('Startup probe: the gateway has this many periods to come up.', 2, 30),
    liveness: probe('Liveness probe.', 10, 3),
    readiness: probe('Readiness probe: not ready while the store is unreachable or the replica drains.', 5, 2),
  }),
  resources: k8sObject('Container resources; requests are set so the HPA and the scheduler can work.', {
    requests: { cpu: '100m', memory: '128Mi' },
    limits: { memory: '512Mi' },
  }),
  autoscaling: group('A HorizontalPodAutoscaler, autoscaling/v2 (contract).', {
    enabled: bool('Create it (the Deployment then leaves `replicas` to it).', false),
    minReplicas: int('Fewest replicas.', 2, 1),
    maxReplicas: int('Most replicas.', 10, 1),
    targetCPUUtilizationPercentage: int('Average CPU utilisation aimed at (of the requests).', 70, 1),
    targetMemoryUtilizationPercentage: int('Average memory utilisation aimed at; empty: not a target.', null, 1),
    behavior: k8sObject('The HPA\'s scaling behavior, as it is.'),
  }),
  podDisruptionBudget: group('A PodDisruptionBudget, policy/v1 (contract); rendered only when more than one replica may run.', {
    enabled: bool('Create it.', true),
    minAvailable: leaf('Pods that must stay up during voluntary disruptions (a number or a percentage).', 1, {
      type: ['integer', 'string'],
      pattern: '^[0-9]+%$',
      minimum: 0,
    }),
  }),
  topologySpreadConstraints: k8sList(
    `Topology spread constraints (contract). Empty: spread over nodes and zones (maxSkew 1, ScheduleAnyway). An entry
    without \`labelSelector\` gets the pods' selector labels.`,
  ),
  defaultTopologySpread: bool('Use the default spread when `topologySpreadConstraints` is empty.', true),
  affinity: k8sObject('Pod affinity (contract).'),
  nodeSelector: strings('Node selector (contract).'),
  tolerations: k8sList('Tolerations (contract).'),
  priorityClassName: str('Priority class of the pods (contract).'),
  metrics: group('Prometheus Operator and Grafana objects (contract). With `config.auth`, `/metrics` needs an admin credential: see `serviceMonitor.authorization`.', {
    serviceMonitor: group('A ServiceMonitor on the Service\'s `metrics` port, path `config.metrics.path`.', {
      enabled: bool('Create it (needs the Prometheus Operator\'s CRDs).', false),
      interval: str('Scrape interval.', '30s', { pattern: '^[0-9]+(ms|s|m|h)$' }),
      scrapeTimeout: str('Scrape timeout.', '10s', { pattern: '^[0-9]+(ms|s|m|h)$' }),
      labels: strings('More labels (to match your Prometheus\' `serviceMonitorSelector`).'),
      authorization: secretRef('A bearer credential of an `auth.admin` principal, for `/metrics` behind auth.'),
    }),
    prometheusRule: group('A PrometheusRule with the gateway\'s alerts (files/prometheus-rules.yaml).', {
      enabled: bool('Create it.', false),
      labels: strings('More labels (to match your Prometheus\' `ruleSelector`).'),
    }),
    grafanaDashboard: group('A ConfigMap with the Grafana dashboard (files/grafana-dashboard.json) for Grafana\'s sidecar.', {
      enabled: bool('Create it.', false),
      namespace: str('Its namespace; empty: the release\'s.'),
      labels: strings('Labels the sidecar looks for.', { grafana_dashboard: '1' }),
      annotations: strings('Annotations (e.g. the sidecar\'s folder annotation).'),
    }),
  }),
  networkPolicy: group('A NetworkPolicy for the pods (contract).', {
    enabled: bool('Create it.', false),
    ingressFrom: k8sList('Who may reach the gateway\'s port (NetworkPolicyPeer list); empty: anyone. The release\'s `helm test` pod always may.'),
    egress: k8sList('Egress rules; empty: egress stays open (upstreams can be anywhere). Given: only these (remember DNS and Redis).'),
  }),
  ingress: group('An Ingress (contract). For SSE the proxy must not buffer and must allow long reads (see the README).', {
    enabled: bool('Create it.', false),
    className: str('The IngressClass.'),
    annotations: strings('Annotations (proxy timeouts, buffering).'),
    hosts: leaf('Hosts and paths, `[{ host: mcp.example.com, paths: [{ path: /, pathType: Prefix }] }]`; the gateway accepts these Host names.', [], {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['host'],
        properties: {
          host: { type: 'string', minLength: 1 },
          paths: {
            type: 'array',
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['path'],
              properties: { path: { type: 'string' }, pathType: { type: 'string', enum: ['Prefix', 'Exact', 'ImplementationSpecific'] } },
            },
          },
        },
      },
    }),
    tls: leaf('TLS, `[{ secretName: mcp-tls, hosts: [mcp.example.com] }]`.', [], {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        properties: { secretName: { type: 'string' }, hosts: { type: 'array', items: { type: 'string' } } },
      },
    }),
  }),
  httpRoute: group('A Gateway API HTTPRoute (gateway.networking.k8s.io/v1), the route\'s alternative to an Ingress.', {
    enabled: bool('Create it.', false),
    annotations: strings('Annotations.'),
    parentRefs: k8sList('The Gateways it attaches to, `[{ name: my-gateway, namespace: gateway-system }]`.'),
    hostnames: leaf('Its host names; the gateway accepts these Host names.', [], { type: 'array', items: { type: 'string' } }),
    timeouts: k8sObject('The rule\'s `timeouts` (`request`, `backendRequest`); empty: the Gateway\'s own, which may cut SSE streams.'),
  }),
  tests: group('The `helm test` pod: /healthz, then MCP initialize and tools/list against the Service.', {
    enabled: bool('Render it.', true),
    apiKey: secretRef('The API key it sends when `config.auth` is on.'),
  }),
};
