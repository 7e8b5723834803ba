// Whether the gateway exports traces, decided by the standard OpenTelemetry variables as any SDK reads them:
// on when an OTLP exporter is asked for (OTEL_TRACES_EXPORTER=otlp) or an OTLP endpoint is given, off when
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER names no OTLP (`none`).

type Env = Readonly<Record<string, string | undefined>>;

export function tracingEnabled(env: Env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((name) => name.trim().toLowerCase()).filter((name) => name !== '');
  if (exporters.length > 0) return exporters.includes('otlp');
  return nonEmpty(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) || nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
}

/** Why the configured OTLP protocol is not the one the gateway sends (it speaks OTLP over HTTP only), if it is not. */
export function unsupportedProtocol(env: Env): string | undefined {
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim();
  if (protocol === undefined || protocol === '' || protocol.startsWith('http/')) return undefined;
  return `OTLP protocol '${protocol}' is not supported: traces go as OTLP over HTTP (JSON) to the same endpoint`;
}

function nonEmpty(value: string | undefined): boolean {
  return value !== undefined && value.trim() !== '';
}
