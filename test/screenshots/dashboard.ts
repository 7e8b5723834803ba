// `npm run screenshots`: starts a gateway (memory store) in front of the fixture upstream, makes tasks of every
// kind with the SDK client, and saves the dashboard as PNGs into docs/images/ with headless Chromium (Debian's
// `chromium` from PATH). docs/operations.md shows them; run this again when the page changes.
import { mkdirSync } from 'node:fs';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Page } from 'puppeteer-core';
import { connectClient, fixtureUpstream, startTestGateway } from '../helpers/harness.js';
import { launchChromium, startTask } from '../helpers/dashboard-browser.js';

const OUT = new URL('../../docs/images/', import.meta.url);
const WAIT = { timeout: 60_000 };

async function shoot(page: Page, name: string): Promise<void> {
  const path = new URL(name, OUT).pathname;
  await page.screenshot({ path, fullPage: false });
  console.log(`wrote ${path}`);
}

const upstream = await fixtureUpstream('streamable-http');
const gateway = await startTestGateway({
  upstreams: { tools: upstream.config },
  tasks: { defaults: { mode: 'optional', pollIntervalMs: 500 } },
});
const { client } = await connectClient(gateway.url);
const browser = await launchChromium();
try {
  // Ended ones first (the list is newest first): completed, a tool error, cancelled; then running ones.
  for (const ms of [5, 20]) await client.experimental.tasks.getTaskResult(await startTask(client, 'report', { ms }), CallToolResultSchema);
  const failed = await startTask(client, 'fail_tool', { message: 'The export target is read-only' });
  await client.experimental.tasks.getTaskResult(failed, CallToolResultSchema).catch(() => undefined);
  const cancelled = await startTask(client, 'slow', { ms: 600_000 });
  await client.experimental.tasks.cancelTask(cancelled);
  await startTask(client, 'slow', { ms: 600_000 });
  // A running task whose status message is its progress.
  const progressing = client.request(
    { method: 'tools/call', params: { name: 'slow', arguments: { ms: 600_000, steps: 200 }, task: {} } },
    CreateTaskResultSchema,
    { onprogress: () => undefined },
  );
  const withProgress = (await progressing).task.taskId;

  mkdirSync(OUT, { recursive: true });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 560, deviceScaleFactor: 1 });
  await page.goto(`${gateway.origin}/ui/`, WAIT);
  await page.waitForFunction((id: string) => /step/.test(document.querySelector(`tr[data-task-id="${id}"] td.message`)?.textContent ?? ''), WAIT, withProgress);
  await shoot(page, 'dashboard-tasks.png');

  const completed = await page.$eval('#tasks tbody tr[data-status="completed"]', (row) => row.getAttribute('data-task-id') as string);
  await page.click(`tr[data-task-id="${completed}"] td.tool`);
  await page.waitForSelector(`#detail[data-task-id="${completed}"]:not([hidden])`, WAIT);
  await shoot(page, 'dashboard-detail.png');

  await page.click('#detail-close');
  await page.select('#filter-status', 'working,input_required');
  await page.waitForFunction(() => [...document.querySelectorAll('#tasks tbody tr')].every((row) => row.getAttribute('data-status') === 'working'), WAIT);
  await shoot(page, 'dashboard-filtered.png');
} finally {
  await browser.close();
  await client.close();
  await gateway.close();
  await upstream.stop();
}
