import { request } from 'node:http';

/** One HTTP GET (or another method) against a plain-HTTP listener: status, headers and body. */
export function httpGet(
  port: number,
  path: string,
  method = 'GET',
  host = '127.0.0.1',
  headers: Record<string, string> = {},
): Promise<{ status: number; contentType: string; allow: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, method, agent: false, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), allow: res.headers.allow, body }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * The samples of a Prometheus text exposition, keyed `name{label="value",...}` exactly as written
 * (labels in the order the exporter writes them). Comment lines are left out.
 */
export function parsePrometheus(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    if (at < 0) throw new Error(`not a sample line: ${line}`);
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

/** GETs /metrics (with `token`: the diag_token_file bearer token) and parses it; a sample never exported reads as 0 through `value`. */
export async function scrape(
  port: number,
  host = '127.0.0.1',
  token?: string,
): Promise<{ value: (key: string) => number; samples: Map<string, number>; text: string }> {
  const res = await httpGet(port, '/metrics', 'GET', host, token === undefined ? {} : { Authorization: `Bearer ${token}` });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${res.body}`);
  const samples = parsePrometheus(res.body);
  return { value: (key) => samples.get(key) ?? 0, samples, text: res.body };
}
