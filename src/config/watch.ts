// Notices that the config file changed. The directory is watched, not the file: editors save by writing a new
// file and renaming it over the old one, and Kubernetes swaps a ConfigMap's `..data` symlink, both of which a
// watch on the file itself stops seeing. A burst of events (an editor's write, chmod and rename) settles into one
// call; a call comes only when the file's bytes differ from the last ones seen, so unrelated files in the
// directory and touches that change nothing cost one read.
import { createHash } from 'node:crypto';
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';

/** Quiet time after the last event before the file is read. */
const DEFAULT_DEBOUNCE_MS = 250;

export interface ConfigWatch {
  close(): void;
}

export interface ConfigWatchOptions {
  debounceMs?: number;
  /** The watch itself failed (the directory went away, too many watches): the gateway keeps running without it. */
  onError?(error: Error): void;
}

/** Calls `changed` after the file at `path` has new contents (settled for `debounceMs`). */
export function watchConfigFile(path: string, changed: () => void, options: ConfigWatchOptions = {}): ConfigWatch {
  const file = resolve(path);
  const name = basename(file);
  const debounceMs = options.debounceMs ?? DEFAULT_DEBOUNCE_MS;
  // Read now, before the watch starts: a change that lands right after this call returns is then news, not the
  // baseline (read asynchronously, the first digest could see the new bytes and swallow the change).
  let last: Promise<string | undefined> = Promise.resolve(digestNow(file));
  let timer: NodeJS.Timeout | undefined;

  const settled = (): void => {
    timer = undefined;
    const before = last;
    last = digest(file);
    void Promise.all([before, last]).then(([a, b]) => {
      // A file that is gone for a moment (mid-rename) is not news; its new contents will be.
      if (b !== undefined && a !== b) changed();
    });
  };
  let watcher: FSWatcher;
  try {
    watcher = watch(dirname(file), { persistent: false }, (_event, filename) => {
      // `..data` and its kin: a Kubernetes ConfigMap volume swapping its contents under a symlinked file.
      if (filename !== null && filename !== name && !filename.startsWith('..')) return;
      clearTimeout(timer);
      timer = setTimeout(settled, debounceMs);
    });
  } catch (error) {
    options.onError?.(error as Error);
    return { close: () => undefined };
  }
  watcher.on('error', (error) => options.onError?.(error));
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}

function digestNow(file: string): string | undefined {
  try {
    return createHash('sha256').update(readFileSync(file)).digest('hex');
  } catch {
    return undefined;
  }
}

async function digest(file: string): Promise<string | undefined> {
  try {
    return createHash('sha256').update(await readFile(file)).digest('hex');
  } catch {
    return undefined;
  }
}
