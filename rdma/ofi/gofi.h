//go:build ofi

// The C side of gompj's libfabric provider: one call of Go per libfabric operation, no state kept here beyond
// what libfabric needs (the fids, the operation contexts, the completion buffer), and never a Go pointer kept
// after a call returns unless Go pinned its memory first. Buffers libfabric keeps (registered, posted, sent,
// read into or written from) come as integers: Go pinned them before the call (endpoint.go), and an integer
// spares the call cgo's check of the whole Go object around the buffer, which may hold other, unpinned pointers.

#ifndef GOFI_H
#define GOFI_H

#include <stddef.h>
#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#if FI_MAJOR_VERSION < 1 || (FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION < 17)
#error "gompj's ofi provider needs libfabric 1.17 or later (Debian: apt-get install libfabric-dev)"
#endif

#define GOFI_API FI_VERSION(1, 17)

// Bytes of a control message buffer (hello, heartbeat, goodbye).
#define GOFI_CTL 64

// Heartbeat receives posted apart from the device's (FI_TAGGED), and the bytes of each.
#define GOFI_BEATS 16
#define GOFI_BEAT 8

// Result of gofi_poll when it read an error entry into ep->err (libfabric's own codes are small negatives).
#define GOFI_ERRENTRY (-1000000)

typedef struct gofi_ep {
	struct fi_info *info; // the fabric chosen (owned)
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	int tagged;   // 1: FI_TAGGED, the word travels in the tag; 0: FI_MSG, the word travels as remote CQ data
	int waitable; // the CQ has a wait object: gofi_wait blocks in the provider

	// Operation contexts: one per operation in flight (FI_CONTEXT2 sized, as some providers demand).
	struct fi_context2 *slots;
	size_t nslots;

	// Completions read by gofi_poll; Go reads them in place.
	struct fi_cq_tagged_entry *cqbuf;
	size_t cqcap;
	struct fi_cq_err_entry err;
	char errstr[256];

	// Control buffers: one per node to send from (goodbyes), and GOFI_BEATS heartbeat receives.
	char *ctl;
	size_t nctl;
	char *beat;

	// Scratch for addresses handed to fi_av_insert: a peer's blob is copied into zeroed memory longer than any
	// address format reads, so that a short or malformed blob can never make libfabric read past it.
	char addr[8192];
} gofi_ep;

int gofi_getinfo(const char *prov, const char *node, int tagged, int rma, int ordered, struct fi_info **out);
int gofi_open(struct fi_info *info, int tagged, size_t nctl, size_t cqcap, size_t avcount, gofi_ep **out,
	      char *msg, size_t msglen);
void gofi_close(gofi_ep *e);
int gofi_getname(gofi_ep *e, void *buf, size_t *len);
int gofi_av_insert(gofi_ep *e, const void *addr, size_t len, fi_addr_t *out);

ssize_t gofi_recv(gofi_ep *e, uintptr_t buf, size_t len, void *desc, uint64_t tag, uint64_t ignore, size_t slot);
ssize_t gofi_send(gofi_ep *e, uintptr_t buf, size_t len, void *desc, fi_addr_t dest, uint64_t word, size_t slot);
ssize_t gofi_inject(gofi_ep *e, const void *hdr, size_t hlen, const void *pay, size_t plen, fi_addr_t dest,
		    uint64_t word);
ssize_t gofi_rma(gofi_ep *e, int write, uintptr_t buf, size_t len, void *desc, fi_addr_t dest, uint64_t raddr,
		 uint64_t rkey, size_t slot);

int gofi_mr_reg(gofi_ep *e, uintptr_t buf, size_t len, uint64_t access, uint64_t key, struct fid_mr **out);
uint64_t gofi_mr_key(struct fid_mr *mr);
void *gofi_mr_desc(struct fid_mr *mr);
int gofi_mr_close(struct fid_mr *mr);

ssize_t gofi_poll(gofi_ep *e, size_t n);
size_t gofi_slot_of(gofi_ep *e, void *ctx);
int gofi_wait(gofi_ep *e, int ms);
int gofi_signal(gofi_ep *e);

const char *gofi_strerror(int code);

#endif
