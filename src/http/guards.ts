import type { ListenConfig } from '../config/types.js';
import { GatewayError } from '../errors.js';

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

export function isLoopbackHost(host: string): boolean {
  return LOOPBACK_NAMES.has(host) || host.startsWith('127.');
}

function hostnameOf(hostHeader: string): string {
  if (hostHeader.startsWith('[')) return hostHeader.slice(0, hostHeader.indexOf(']') + 1);
  return hostHeader.split(':')[0] ?? hostHeader;
}

/**
 * DNS-rebinding and cross-origin protection. Host: when bound to loopback, only loopback names unless
 * `allowedHosts` says otherwise. Origin: browsers send it; non-browser clients usually don't, and are accepted.
 */
export function checkRequestOrigin(listen: ListenConfig, host: string | undefined, origin: string | undefined): void {
  const loopback = isLoopbackHost(listen.host);
  if (listen.allowedHosts.length > 0 || loopback) {
    const hostname = host === undefined ? undefined : hostnameOf(host.toLowerCase());
    const allowed = listen.allowedHosts.length > 0
      ? host !== undefined && (listen.allowedHosts.includes(host.toLowerCase()) || listen.allowedHosts.includes(hostname ?? ''))
      : hostname !== undefined && isLoopbackHost(hostname);
    if (!allowed) throw new GatewayError('host_forbidden', `Forbidden: Host '${host ?? ''}' is not allowed`);
  }
  if (origin === undefined || listen.allowedOrigins.includes('*')) return;
  if (listen.allowedOrigins.length > 0) {
    if (!listen.allowedOrigins.includes(origin)) throw new GatewayError('origin_forbidden', `Forbidden: Origin '${origin}' is not allowed`);
    return;
  }
  if (!loopback) return;
  let originHost: string;
  try {
    originHost = new URL(origin).hostname;
  } catch {
    throw new GatewayError('origin_forbidden', `Forbidden: Origin '${origin}' is not a valid origin`);
  }
  if (!isLoopbackHost(originHost) && !isLoopbackHost(`[${originHost}]`)) {
    throw new GatewayError('origin_forbidden', `Forbidden: Origin '${origin}' is not allowed`);
  }
}
