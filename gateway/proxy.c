/* proxy: the transparent TCP listener (fd 5).
 *
 * The slot's rules tproxy every TCP connection of the guest here, and
 * the accepted socket's local address is the guest's original
 * destination. Only a synthetic address (one this gateway's DNS gave
 * out) names something: its name comes from the map, never from the
 * guest's bytes. Any other destination (an IP literal, an address the
 * guest learnt elsewhere) is refused and logged. Then by port: 80 and
 * 443 are HTTP and HTTPS, checked per request (relay.c); any other is
 * a pass-through where the policy allows name:port (splice.c). */
#include <arpa/inet.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/addr.h"
#include "cred.h"
#include "gw.h"

static enum al_egress_proto proto_of(unsigned port)
{
	return port == 443  ? AL_EGRESS_HTTPS
	       : port == 80 ? AL_EGRESS_HTTP
			    : AL_EGRESS_TCP;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
		      struct sockaddr *peer, int peer_len, void *arg)
{
	(void)l;
	(void)peer;
	(void)peer_len;
	gw *g = arg;
	struct sockaddr_in dst;
	socklen_t len = sizeof dst;
	if (getsockname(fd, (struct sockaddr *)&dst, &len) < 0 ||
	    dst.sin_family != AF_INET) {
		close(fd);
		return;
	}
	uint32_t addr = ntohl(dst.sin_addr.s_addr);
	unsigned port = ntohs(dst.sin_port);
	static al_net_prefix synthetic;
	if (synthetic.len == 0)
		al_net_prefix_parse(AL_NET_SYNTHETIC, &synthetic, NULL);
	bool is_synthetic = al_net_prefix_contains(&synthetic, addr);
	const char *name = is_synthetic ? al_fakeip_name(g->fakeip, addr)
					: NULL;
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &dst.sin_addr, ip, sizeof ip);
	if (g->conns >= GW_CONNS_MAX) {
		g->conns_refused++;
		gw_log(g, false, "too many connections", proto_of(port),
		       name != NULL ? name : ip, port, NULL, NULL);
		close(fd);
		return;
	}
	if (name == NULL) {
		gw_log(g, false,
		       is_synthetic ? "synthetic address never given out"
				    : "not a name the gateway resolved",
		       proto_of(port), ip, port, NULL, NULL);
		close(fd);
		return;
	}
	g->conns++;
	g->conns_total++;
	/* What is relayed is written whole: Nagle would only delay it. */
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	/* A changed policy file applies from the next connection on. */
	al_policy_reload_if_changed(g->policy);
	gw_cred_policy_check(g, true);
	if (port == 80 || port == 443) {
		gw_relay_start(g, fd, name, port);
		return;
	}
	if (!gw_decide_log(g, AL_EGRESS_TCP, name, port, NULL, NULL)) {
		close(fd);
		gw_conn_closed(g);
		return;
	}
	gw_splice_start(g, fd, name, port);
}

int gw_proxy_start(gw *g, int fd, al_err *err)
{
	evutil_make_socket_nonblocking(fd);
	g->listener = evconnlistener_new(g->base, on_accept, g,
					 LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (g->listener == NULL)
		return al_err_set(err, AL_ESYS, 0,
				  "cannot watch the transparent listener");
	return 0;
}
