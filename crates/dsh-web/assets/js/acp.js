// The page's ACP client: JSON-RPC 2.0 over the server's WebSocket at /acp, one text message
// per frame. The page is an ordinary ACP client; the cookie set when it was opened with
// ?token= authenticates the upgrade.

export class AcpError extends Error {
  constructor(error) {
    super(error?.message ?? 'request failed');
    this.code = error?.code;
    this.data = error?.data;
  }
}

export class Connection {
  // handlers: {onState(state), onNotification(method, params), onRequest(method, params, id)
  // -> Promise<result>, onWithdraw(id)}
  constructor(handlers) {
    this.handlers = handlers;
    this.nextId = 1;
    this.pending = new Map();
    this.retry = 0;
    this.ws = null;
    this.closedByPage = false;
  }

  open() {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const ws = new WebSocket(`${scheme}://${location.host}/acp`);
    this.ws = ws;
    this.handlers.onState('connecting');
    ws.onopen = async () => {
      this.retry = 0;
      try {
        const init = await this.request('initialize', {
          protocolVersion: 1,
          clientCapabilities: {},
          clientInfo: { name: 'dsh-web-page', version: '1' },
        });
        this.handlers.onState('open', init);
      } catch (e) {
        this.handlers.onState('failed', e);
      }
    };
    ws.onmessage = (event) => this.receive(event.data);
    ws.onclose = () => {
      for (const { reject } of this.pending.values()) {
        reject(new AcpError({ message: 'the connection to dsh was lost' }));
      }
      this.pending.clear();
      if (this.closedByPage) return;
      this.handlers.onState('closed');
      // Reconnect with backoff: dsh may be restarting, or the laptop woke up.
      const delay = Math.min(10000, 500 * 2 ** this.retry++);
      setTimeout(() => this.open(), delay);
    };
  }

  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
        reject(new AcpError({ message: 'not connected to dsh' }));
        return;
      }
      this.pending.set(id, { resolve, reject, method });
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }

  notify(method, params) {
    if (this.ws?.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', method, params }));
    }
  }

  // Withdraws an outstanding request of ours ($/cancel_request).
  cancelRequest(id) {
    this.notify('$/cancel_request', { requestId: id });
  }

  receive(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (msg.method && msg.id !== undefined) {
      this.answer(msg);
    } else if (msg.method) {
      if (msg.method === '$/cancel_request') this.handlers.onWithdraw(msg.params?.requestId);
      else this.handlers.onNotification(msg.method, msg.params ?? {});
    } else if (msg.id !== undefined) {
      const waiting = this.pending.get(msg.id);
      if (!waiting) return;
      this.pending.delete(msg.id);
      if (msg.error) waiting.reject(new AcpError(msg.error));
      else waiting.resolve(msg.result);
    }
  }

  async answer(msg) {
    const reply = (body) => {
      if (this.ws?.readyState === WebSocket.OPEN) {
        this.ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, ...body }));
      }
    };
    try {
      const result = await this.handlers.onRequest(msg.method, msg.params ?? {}, msg.id);
      if (result !== undefined) reply({ result });
    } catch (e) {
      reply({ error: { code: e.code ?? -32603, message: e.message ?? String(e) } });
    }
  }
}
