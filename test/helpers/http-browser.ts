// A browser made of plain HTTP, for consent flows without Chromium (issue 41): cookies kept per host (name=value,
// sent back to the host that set them, whatever the path: a test browser needs no more), redirects followed one by
// one and recorded, and the link or form a page offers followed the way a person would (no JavaScript runs). Each
// instance is one browser: two instances are two people.

export interface Visit {
  url: string;
  status: number;
  location?: string;
}

export interface Page {
  url: string;
  status: number;
  headers: Headers;
  text: string;
}

const MAX_REDIRECTS = 12;

export class HttpBrowser {
  /** host (with port) → cookie name → value. */
  private readonly jar = new Map<string, Map<string, string>>();
  /** Every request made, in order, with its status and where it redirected. */
  readonly visits: Visit[] = [];

  /** Sets a cookie for `origin`'s host, as if a page there had set it (a fixture's login cookie). */
  setCookie(origin: string, name: string, value: string): void {
    const host = new URL(origin).host;
    const cookies = this.jar.get(host) ?? new Map<string, string>();
    cookies.set(name, value);
    this.jar.set(host, cookies);
  }

  /** The cookies this browser holds for `origin`'s host. */
  cookies(origin: string): ReadonlyMap<string, string> {
    return this.jar.get(new URL(origin).host) ?? new Map();
  }

  /** Every Set-Cookie header attribute line seen for `name` (to check HttpOnly, SameSite, Secure). */
  readonly setCookieLines: string[] = [];

  /** GETs `url` and follows redirects to the page they end on. */
  async open(url: string, init: { method?: string; body?: URLSearchParams } = {}): Promise<Page> {
    let next = url;
    let method = init.method ?? 'GET';
    let body: URLSearchParams | undefined = init.body;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const response = await this.request(next, method, body);
      const location = response.headers.get('location') ?? undefined;
      this.visits.push({ url: next, status: response.status, ...(location !== undefined && { location }) });
      if (response.status >= 300 && response.status < 400 && location !== undefined) {
        await response.arrayBuffer();
        next = new URL(location, next).toString();
        // 303 and a POST's 302 turn into a GET, as browsers do.
        if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === 'POST')) {
          method = 'GET';
          body = undefined;
        }
        continue;
      }
      return { url: next, status: response.status, headers: response.headers, text: await response.text() };
    }
    throw new Error(`more than ${MAX_REDIRECTS} redirects from ${url}`);
  }

  /** Follows the first link on `page` whose href matches `pattern` (the way on a page without JavaScript). */
  async follow(page: Page, pattern: RegExp): Promise<Page> {
    const href = [...page.text.matchAll(/href="([^"]+)"/g)].map((m) => decodeEntities(m[1] ?? '')).find((h) => pattern.test(h));
    if (href === undefined) throw new Error(`no link matching ${String(pattern)} on ${page.url}:\n${page.text.slice(0, 2000)}`);
    return this.open(new URL(href, page.url).toString());
  }

  /** Submits the first form on `page` (its hidden and named fields, plus `extra`), by its method and action. */
  async submit(page: Page, extra: Record<string, string> = {}): Promise<Page> {
    const form = /<form([^>]*)>([\s\S]*?)<\/form>/i.exec(page.text);
    if (form === null) throw new Error(`no form on ${page.url}`);
    const attrs = form[1] ?? '';
    const action = decodeEntities(/action="([^"]*)"/i.exec(attrs)?.[1] ?? page.url);
    const method = (/method="([^"]*)"/i.exec(attrs)?.[1] ?? 'GET').toUpperCase();
    const fields = new URLSearchParams();
    for (const input of (form[2] ?? '').matchAll(/<(?:input|button)([^>]*)>/gi)) {
      const name = /name="([^"]*)"/i.exec(input[1] ?? '')?.[1];
      const value = /value="([^"]*)"/i.exec(input[1] ?? '')?.[1] ?? '';
      if (name !== undefined && !fields.has(name)) fields.set(decodeEntities(name), decodeEntities(value));
    }
    for (const [name, value] of Object.entries(extra)) fields.set(name, value);
    const target = new URL(action, page.url);
    if (method === 'GET') {
      for (const [name, value] of fields) target.searchParams.set(name, value);
      return this.open(target.toString());
    }
    return this.open(target.toString(), { method, body: fields });
  }

  private async request(url: string, method: string, body: URLSearchParams | undefined): Promise<Response> {
    const host = new URL(url).host;
    const cookies = this.jar.get(host);
    const headers: Record<string, string> = {};
    if (cookies !== undefined && cookies.size > 0) headers.cookie = [...cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    if (body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const response = await fetch(url, { method, headers, redirect: 'manual', ...(body !== undefined && { body: body.toString() }) });
    for (const line of response.headers.getSetCookie()) this.keepCookie(host, line);
    return response;
  }

  private keepCookie(host: string, line: string): void {
    this.setCookieLines.push(line);
    const [pair = ''] = line.split(';');
    const eq = pair.indexOf('=');
    if (eq <= 0) return;
    const name = pair.slice(0, eq).trim();
    const value = pair.slice(eq + 1).trim();
    const cookies = this.jar.get(host) ?? new Map<string, string>();
    // Max-Age=0 or an empty value deletes it, as a browser does.
    if (value === '' || /;\s*max-age=0\b/i.test(line)) cookies.delete(name);
    else cookies.set(name, value);
    this.jar.set(host, cookies);
  }
}

function decodeEntities(text: string): string {
  return text.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>');
}
