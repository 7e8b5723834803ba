// A promise with a deadline: a handshake that never ends must not hold a connection attempt forever.

/** `promise`, or a rejection with `message` once `ms` passed (ms <= 0: no deadline). */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  if (ms <= 0) return promise;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
