/**
 * The `GET /webapi/ping` answer: how clients reach each service (docs/proxy.md, "Web endpoints"). Field names are the
 * platform's; as there, an empty field is left out rather than sent as "".
 */
export interface PingResponse {
  proxy: {
    kube: { enabled: boolean; public_addr?: string; listen_addr?: string };
    ssh: {
      listen_addr?: string;
      tunnel_listen_addr?: string;
      web_listen_addr?: string;
      public_addr?: string;
      ssh_public_addr?: string;
      ssh_tunnel_public_addr?: string;
    };
    db: {
      postgres_listen_addr?: string;
      postgres_public_addr?: string;
      mysql_listen_addr?: string;
      mysql_public_addr?: string;
      mongo_listen_addr?: string;
    };
    tls_routing_enabled: boolean;
  };
  server_version: string;
}
