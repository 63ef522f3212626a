//go:build ofi

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gofi.h"

int gofi_getinfo(const char *prov, const char *node, int tagged, int rma, int ordered, struct fi_info **out)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	if (!hints)
		return -FI_ENOMEM;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = tagged ? FI_TAGGED : FI_MSG;
	if (rma)
		hints->caps |= FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	// Every operation gets its own FI_CONTEXT2-sized context, so providers that demand either may be chosen;
	// receives are always posted, so FI_RX_CQ_DATA costs nothing.
	hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
	// The registration modes this provider handles; the fabric's answer says which are in force.
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
	if (!tagged)
		hints->domain_attr->cq_data_size = 4;
	if (ordered) {
		hints->tx_attr->msg_order = FI_ORDER_SAS;
		hints->rx_attr->msg_order = FI_ORDER_SAS;
	}
	if (prov && *prov) {
		hints->fabric_attr->prov_name = strdup(prov);
		if (!hints->fabric_attr->prov_name) {
			fi_freeinfo(hints);
			return -FI_ENOMEM;
		}
	}
	ret = fi_getinfo(GOFI_API, node, NULL, node ? FI_SOURCE : 0, hints, out);
	fi_freeinfo(hints);
	return ret;
}

static void gofi_free(gofi_ep *e)
{
	if (e->ep)
		fi_close(&e->ep->fid);
	if (e->av)
		fi_close(&e->av->fid);
	if (e->cq)
		fi_close(&e->cq->fid);
	if (e->domain)
		fi_close(&e->domain->fid);
	if (e->fabric)
		fi_close(&e->fabric->fid);
	if (e->info)
		fi_freeinfo(e->info);
	free(e->slots);
	free(e->cqbuf);
	free(e->ctl);
	free(e->beat);
	free(e);
}

int gofi_open(struct fi_info *info, int tagged, size_t nctl, size_t cqcap, size_t avcount, gofi_ep **out,
	      char *msg, size_t msglen)
{
	struct fi_cq_attr cq_attr;
	struct fi_av_attr av_attr;
	const char *call = "calloc";
	size_t txs, rxs;
	gofi_ep *e;
	int ret = -FI_ENOMEM;

	e = calloc(1, sizeof *e);
	if (!e)
		goto fail;
	e->tagged = tagged;
	call = "fi_dupinfo";
	e->info = fi_dupinfo(info);
	if (!e->info)
		goto fail;
	txs = e->info->tx_attr->size ? e->info->tx_attr->size : 1024;
	rxs = e->info->rx_attr->size ? e->info->rx_attr->size : 1024;
	// More contexts than the queues hold would only turn FI_EAGAIN into a wait for a context; fewer would refuse
	// work the provider takes.
	e->nslots = txs + rxs + nctl + GOFI_BEATS + 64;
	if (e->nslots > (1u << 20))
		e->nslots = 1u << 20;
	e->cqcap = cqcap;
	e->nctl = nctl;
	call = "calloc";
	e->slots = calloc(e->nslots, sizeof *e->slots);
	e->cqbuf = calloc(cqcap, sizeof *e->cqbuf);
	e->ctl = calloc(nctl + 1, GOFI_CTL);
	e->beat = calloc(GOFI_BEATS, GOFI_BEAT);
	if (!e->slots || !e->cqbuf || !e->ctl || !e->beat)
		goto fail;

	call = "fi_fabric";
	ret = fi_fabric(e->info->fabric_attr, &e->fabric, NULL);
	if (ret)
		goto fail;
	call = "fi_domain";
	ret = fi_domain(e->fabric, e->info, &e->domain, NULL);
	if (ret)
		goto fail;

	memset(&cq_attr, 0, sizeof cq_attr);
	cq_attr.format = FI_CQ_FORMAT_TAGGED;
	cq_attr.size = txs + rxs + nctl + GOFI_BEATS + 64;
	cq_attr.wait_obj = FI_WAIT_UNSPEC;
	call = "fi_cq_open";
	ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);
	if (ret) {
		// No wait object: gofi_wait reports it and the Go side sleeps instead.
		cq_attr.wait_obj = FI_WAIT_NONE;
		ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);
		if (ret)
			goto fail;
	} else {
		e->waitable = 1;
	}

	memset(&av_attr, 0, sizeof av_attr);
	av_attr.type = e->info->domain_attr->av_type;
	av_attr.count = avcount;
	call = "fi_av_open";
	ret = fi_av_open(e->domain, &av_attr, &e->av, NULL);
	if (ret)
		goto fail;

	call = "fi_endpoint";
	ret = fi_endpoint(e->domain, e->info, &e->ep, NULL);
	if (ret)
		goto fail;
	call = "fi_ep_bind(av)";
	ret = fi_ep_bind(e->ep, &e->av->fid, 0);
	if (ret)
		goto fail;
	call = "fi_ep_bind(cq)";
	ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		goto fail;
	call = "fi_enable";
	ret = fi_enable(e->ep);
	if (ret)
		goto fail;
	*out = e;
	return 0;

fail:
	snprintf(msg, msglen, "%s: %s", call, fi_strerror(ret < 0 ? -ret : ret));
	if (e)
		gofi_free(e);
	return ret ? ret : -FI_EOTHER;
}

void gofi_close(gofi_ep *e)
{
	gofi_free(e);
}

int gofi_getname(gofi_ep *e, void *buf, size_t *len)
{
	return fi_getname(&e->ep->fid, buf, len);
}

int gofi_av_insert(gofi_ep *e, const void *addr, size_t len, fi_addr_t *out)
{
	int ret;

	if (len >= sizeof e->addr)
		return -FI_EINVAL;
	memset(e->addr, 0, sizeof e->addr);
	memcpy(e->addr, addr, len);
	*out = FI_ADDR_NOTAVAIL;
	ret = fi_av_insert(e->av, e->addr, 1, out, 0, NULL);
	if (ret == 1 && *out != FI_ADDR_NOTAVAIL)
		return 0;
	return ret < 0 ? ret : -FI_EADDRNOTAVAIL;
}

ssize_t gofi_recv(gofi_ep *e, uintptr_t buf, size_t len, void *desc, uint64_t tag, uint64_t ignore, size_t slot)
{
	void *ctx = &e->slots[slot];

	if (e->tagged)
		return fi_trecv(e->ep, (void *)buf, len, desc, FI_ADDR_UNSPEC, tag, ignore, ctx);
	return fi_recv(e->ep, (void *)buf, len, desc, FI_ADDR_UNSPEC, ctx);
}

ssize_t gofi_send(gofi_ep *e, uintptr_t buf, size_t len, void *desc, fi_addr_t dest, uint64_t word, size_t slot)
{
	void *ctx = &e->slots[slot];

	if (e->tagged)
		return fi_tsend(e->ep, (void *)buf, len, desc, dest, word, ctx);
	return fi_senddata(e->ep, (void *)buf, len, desc, word, dest, ctx);
}

ssize_t gofi_inject(gofi_ep *e, const void *hdr, size_t hlen, const void *pay, size_t plen, fi_addr_t dest,
		    uint64_t word)
{
	// Inject takes one buffer: header and payload meet on the C stack (the Go side keeps inject sizes small).
	char tmp[4096];
	const void *buf = hdr;
	size_t len = hlen + plen;

	if (plen) {
		if (len > sizeof tmp)
			return -FI_EMSGSIZE;
		memcpy(tmp, hdr, hlen);
		memcpy(tmp + hlen, pay, plen);
		buf = tmp;
	}
	if (e->tagged)
		return fi_tinject(e->ep, buf, len, dest, word);
	return fi_injectdata(e->ep, buf, len, word, dest);
}

ssize_t gofi_rma(gofi_ep *e, int write, uintptr_t buf, size_t len, void *desc, fi_addr_t dest, uint64_t raddr,
		 uint64_t rkey, size_t slot)
{
	struct fi_rma_iov riov = {.addr = raddr, .len = len, .key = rkey};
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.addr = dest,
		.rma_iov = &riov,
		.rma_iov_count = 1,
		.context = &e->slots[slot],
	};

	if (write)
		// The completion must mean the data is in the target's memory: the device tells the peer so next.
		return fi_writemsg(e->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
	return fi_readmsg(e->ep, &msg, FI_COMPLETION);
}

int gofi_mr_reg(gofi_ep *e, uintptr_t buf, size_t len, uint64_t access, uint64_t key, struct fid_mr **out)
{
	int ret;

	ret = fi_mr_reg(e->domain, (void *)buf, len, access, 0, key, 0, out, NULL);
	if (ret)
		return ret;
	if (e->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		ret = fi_mr_bind(*out, &e->ep->fid, 0);
		if (!ret)
			ret = fi_mr_enable(*out);
		if (ret) {
			fi_close(&(*out)->fid);
			*out = NULL;
		}
	}
	return ret;
}

uint64_t gofi_mr_key(struct fid_mr *mr)
{
	return fi_mr_key(mr);
}

void *gofi_mr_desc(struct fid_mr *mr)
{
	return fi_mr_desc(mr);
}

int gofi_mr_close(struct fid_mr *mr)
{
	return fi_close(&mr->fid);
}

ssize_t gofi_poll(gofi_ep *e, size_t n)
{
	ssize_t ret;
	const char *s;

	if (n > e->cqcap)
		n = e->cqcap;
	ret = fi_cq_read(e->cq, e->cqbuf, n);
	if (ret != -FI_EAVAIL)
		return ret;
	memset(&e->err, 0, sizeof e->err);
	ret = fi_cq_readerr(e->cq, &e->err, 0);
	if (ret < 0)
		return ret;
	e->errstr[0] = 0;
	s = fi_cq_strerror(e->cq, e->err.prov_errno, e->err.err_data, e->errstr, sizeof e->errstr);
	if (s && s != e->errstr)
		snprintf(e->errstr, sizeof e->errstr, "%s", s);
	return GOFI_ERRENTRY;
}

// gofi_slot_of returns the slot an operation context names, or nslots if it names none.
size_t gofi_slot_of(gofi_ep *e, void *ctx)
{
	char *p = ctx, *base = (char *)e->slots;

	if (p < base || p >= base + e->nslots * sizeof *e->slots || (size_t)(p - base) % sizeof *e->slots)
		return e->nslots;
	return (size_t)(p - base) / sizeof *e->slots;
}

// gofi_wait blocks until the completion queue holds something, gofi_signal is called, or ms pass, without taking
// any completion: reading zero entries waits like any read but leaves the queue to gofi_poll, whose caller must
// see completions in the provider's order.
int gofi_wait(gofi_ep *e, int ms)
{
	ssize_t ret;

	if (!e->waitable)
		return -FI_ENOSYS;
	ret = fi_cq_sread(e->cq, e->cqbuf, 0, NULL, ms);
	if (ret == -FI_EAVAIL || ret >= 0)
		return 0;
	if (ret == -FI_EAGAIN || ret == -FI_ETIMEDOUT)
		return -FI_EAGAIN;
	return (int)ret;
}

int gofi_signal(gofi_ep *e)
{
	if (!e->waitable)
		return -FI_ENOSYS;
	return fi_cq_signal(e->cq);
}

const char *gofi_strerror(int code)
{
	return fi_strerror(code < 0 ? -code : code);
}
