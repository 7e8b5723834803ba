// When tracing is on, as the standard OpenTelemetry variables say.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tracingEnabled, unsupportedProtocol } from '../../src/observability/tracing-config.js';

test('tracing is off by default and on with an OTLP exporter or endpoint', () => {
  assert.equal(tracingEnabled({}), false);
  assert.equal(tracingEnabled({ OTEL_TRACES_EXPORTER: 'otlp' }), true);
  assert.equal(tracingEnabled({ OTEL_TRACES_EXPORTER: 'console, otlp' }), true);
  assert.equal(tracingEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), true);
  assert.equal(tracingEnabled({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }), true);
  assert.equal(tracingEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }), false);
});

test('OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none win over an endpoint', () => {
  assert.equal(tracingEnabled({ OTEL_SDK_DISABLED: 'TRUE', OTEL_TRACES_EXPORTER: 'otlp' }), false);
  assert.equal(tracingEnabled({ OTEL_SDK_DISABLED: 'false', OTEL_TRACES_EXPORTER: 'otlp' }), true);
  assert.equal(tracingEnabled({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), false);
});

test('only OTLP over HTTP is sent: a grpc protocol is reported', () => {
  assert.equal(unsupportedProtocol({}), undefined);
  assert.equal(unsupportedProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }), undefined);
  assert.match(unsupportedProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }) ?? '', /grpc/);
  assert.equal(unsupportedProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }), undefined);
});

test('no HTTP span for what carries an authorization code, its state or a connect link (issue 41); probes neither', async () => {
  const { untraced } = await import('../../src/observability/tracing-sdk.js');
  for (const url of ['/oauth/callback?code=c0de&state=s7a7e&iss=x', '/oauth/login/callback?code=c&state=s', '/connect/AbCdEf0123456789', '/healthz', '/metrics']) {
    assert.equal(untraced(url), true, url);
  }
  for (const url of ['/mcp', '/mcp?x=1', '/connections', '/approvals', '/dashboard']) assert.equal(untraced(url), false, url);
});
