// Headless Chromium for the dashboard's tests and screenshots: Debian's `chromium` from PATH (.ci/run installs
// it), driven by puppeteer-core. Without chromium this fails, saying how to install it: nothing is skipped.
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';

export function chromiumPath(): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, 'chromium');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  throw new Error('chromium is not on PATH: the dashboard tests need a real browser. Install it with `apt-get install -y chromium` (.ci/run does when it is missing)');
}

export function launchChromium(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'],
    // Generous: a busy two-core machine starts Chromium slowly; this only protects against a hang.
    timeout: 60_000,
  });
}

/** Creates a 2025-11-25 task with the SDK client and answers its id (the task runs on in the gateway). */
export async function startTask(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  const created = await client.request({ method: 'tools/call', params: { name, arguments: args, task: {} } }, CreateTaskResultSchema);
  return created.task.taskId;
}

/**
 * Clicks what `selector` finds, found and clicked in one turn of the page: the dashboard re-renders its lists on every
 * poll, so an element puppeteer's own click() found could be replaced before it reaches it ("Node is detached").
 */
export async function clickNow(page: Page, selector: string): Promise<void> {
  await page.waitForSelector(selector, { timeout: 30_000 });
  const clicked = await page.evaluate((wanted: string) => {
    const found = document.querySelector(wanted);
    if (!(found instanceof HTMLElement)) return false;
    found.click();
    return true;
  }, selector);
  if (!clicked) await clickNow(page, selector); // replaced between the wait and the click: it is there again
}
