/* datasets/registry.c — the registry's entries. Checksums are pinned only where published;
 * where none is (coco.zip, top4.zip), trust on first use applies (registry.h). Never invent a
 * digest: a wrong pin makes the dataset unusable, a missing one is said so by `datasets`. */
#include "datasets/registry.h"

#include <string.h>

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/* ---- CIFAR-10, binary version (docs/papers.md#cifar-data) ---------------------------------------
 * Archive MD5 and size as published on cs.toronto.edu/~kriz/cifar.html and pinned by
 * torchvision's CIFAR10 loader. Each .bin file is exactly 30,730,000 bytes (10,000 records of
 * 3073); the parser checks that, the cap here only bounds what unpacking writes. */
static const nb_source cifar_src[] = {
    {"https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz", "cifar-10-binary.tar.gz", 170052171,
     "c32a1d4ab5d03f1284b67883e8d87530", NULL, NULL, NULL},
};
static const nb_member cifar_members[] = {
    {"data_batch_1.bin", NULL, 30730000}, {"data_batch_2.bin", NULL, 30730000},
    {"data_batch_3.bin", NULL, 30730000}, {"data_batch_4.bin", NULL, 30730000},
    {"data_batch_5.bin", NULL, 30730000}, {"test_batch.bin", NULL, 30730000},
    {"batches.meta.txt", NULL, 4096},
};
static const char *const cifar_extra[] = {"readme.html", NULL};

/* ---- MNIST (LN paper §6.6) -------------------------------------------------------------------
 * The mirror torchvision downloads from since yann.lecun.com stopped serving reliably, with the
 * MD5s of the .gz files as torchvision pins them (torchvision/datasets/mnist.py, MNIST.resources;
 * the same four values appear in every loader derived from it). Sizes and content SHA-256s are
 * not pinned: no published value was available offline; the manifest records the content. */
#define MNIST_URL "https://ossci-datasets.s3.amazonaws.com/mnist/"
static const nb_source mnist_src[] = {
    {MNIST_URL "train-images-idx3-ubyte.gz", "train-images-idx3-ubyte.gz", 0,
     "f68b3c2dcbeaaa9fbdd348bbdeb94873", NULL, NULL, NULL},
    {MNIST_URL "train-labels-idx1-ubyte.gz", "train-labels-idx1-ubyte.gz", 0,
     "d53e105ee54ea40749a09fcbcd1e9432", NULL, NULL, NULL},
    {MNIST_URL "t10k-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz", 0,
     "9fb629c4189551a2d022fa330f9573f3", NULL, NULL, NULL},
    {MNIST_URL "t10k-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 0,
     "ec29112dd5afa0611ce80d1b7f02629c", NULL, NULL, NULL},
};
/* The IDX parser caps the decompressed size at 64 MiB; a .gz is never larger than that. */
static const nb_member idx_members[] = {
    {"train-images-idx3-ubyte.gz", NULL, 64 * MiB},
    {"train-labels-idx1-ubyte.gz", NULL, 64 * MiB},
    {"t10k-images-idx3-ubyte.gz", NULL, 64 * MiB},
    {"t10k-labels-idx1-ubyte.gz", NULL, 64 * MiB},
};

/* ---- Fashion-MNIST ---------------------------------------------------------------------------
 * Upstream URLs (github.com/zalandoresearch/fashion-mnist). Pinned: the SHA-256 of each file's
 * uncompressed content, computed from Debian's dataset-fashion-mnist package files
 * (/usr/share/datasets/fashion-mnist, which recompressed upstream's .gz: other .gz bytes, same
 * content), so upstream's files, Debian's and a recompressing mirror's all verify. */
#define FASHION_URL "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
#define DEBIAN_FASHION "/usr/share/datasets/fashion-mnist/"
static const nb_source fashion_src[] = {
    {FASHION_URL "train-images-idx3-ubyte.gz", "train-images-idx3-ubyte.gz", 0, NULL, NULL,
     "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
     DEBIAN_FASHION "train-images-idx3-ubyte.gz"},
    {FASHION_URL "train-labels-idx1-ubyte.gz", "train-labels-idx1-ubyte.gz", 0, NULL, NULL,
     "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
     DEBIAN_FASHION "train-labels-idx1-ubyte.gz"},
    {FASHION_URL "t10k-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz", 0, NULL, NULL,
     "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
     DEBIAN_FASHION "t10k-images-idx3-ubyte.gz"},
    {FASHION_URL "t10k-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 0, NULL, NULL,
     "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
     DEBIAN_FASHION "t10k-labels-idx1-ubyte.gz"},
};

/* ---- COCO for order-embeddings (docs/papers.md#order-data) --------------------------------------
 * coco.zip of the order-embedding repository; no size or checksum is published and its exact
 * file list was not verified (docs/papers.md#not-found): trust on first use, and members other
 * than these six are skipped (e.g. the 1crop features), never written. */
static const nb_source coco_src[] = {
    {"http://www.cs.toronto.edu/~vendrov/order/coco.zip", "coco.zip", 0, NULL, NULL, NULL, NULL},
};
static const nb_member coco_members[] = {
    {"train.txt", NULL, 512 * MiB},
    {"val.txt", NULL, 64 * MiB},
    {"test.txt", NULL, 64 * MiB},
    {"images/10crop/train.npy", NULL, 4 * GiB},
    {"images/10crop/val.npy", NULL, 512 * MiB},
    {"images/10crop/test.npy", NULL, 512 * MiB},
};

/* ---- CNN "top4" for the attentive reader (docs/papers.md#reader-data) ---------------------------
 * top4.zip: size, MD5 and contents NOT FOUND (docs/papers.md#not-found): trust on first use. */
static const nb_source top4_src[] = {
    {"http://www.cs.toronto.edu/~rkiros/top4.zip", "top4.zip", 0, NULL, NULL, NULL, NULL},
};
static const nb_member top4_members[] = {
    {"dict.pkl", NULL, 256 * MiB},        {"train4_pass.pkl", NULL, 4 * GiB},
    {"train4_qs.pkl", NULL, 1 * GiB},     {"train4_ans.pkl", NULL, 512 * MiB},
    {"valid4_pass.pkl", NULL, 512 * MiB}, {"valid4_qs.pkl", NULL, 256 * MiB},
    {"valid4_ans.pkl", NULL, 256 * MiB},
};

/* ---- Multi30k task 1, English-German (docs/papers.md#mt-data)
 * ------------------------------------- The raw gzipped text of the multi30k/dataset GitHub
 * repository (data/task1/raw/), one sentence a line: 29,000 training pairs, 1,014 validation, 1,000
 * each for the 2016 and 2017 Flickr test sets. The repository publishes no checksums: the SHA-256
 * and sizes pinned here were computed from the files as that repository serves them (master), and
 * checked against their MD5s. The parallel text reader (datasets/mt.h) caps each decompressed file
 * at 64 MiB. */
#define M30K_URL "https://github.com/multi30k/dataset/raw/master/data/task1/raw/"
static const nb_source m30k_src[] = {
    {M30K_URL "train.en.gz", "train.en.gz", 568929, NULL,
     "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f", NULL, NULL},
    {M30K_URL "train.de.gz", "train.de.gz", 637044, NULL,
     "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6", NULL, NULL},
    {M30K_URL "val.en.gz", "val.en.gz", 21650, NULL,
     "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28", NULL, NULL},
    {M30K_URL "val.de.gz", "val.de.gz", 24681, NULL,
     "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a", NULL, NULL},
    {M30K_URL "test_2016_flickr.en.gz", "test_2016_flickr.en.gz", 21077, NULL,
     "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9", NULL, NULL},
    {M30K_URL "test_2016_flickr.de.gz", "test_2016_flickr.de.gz", 22890, NULL,
     "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8", NULL, NULL},
    {M30K_URL "test_2017_flickr.en.gz", "test_2017_flickr.en.gz", 19138, NULL,
     "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074", NULL, NULL},
    {M30K_URL "test_2017_flickr.de.gz", "test_2017_flickr.de.gz", 21471, NULL,
     "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee", NULL, NULL},
};
static const nb_member m30k_members[] = {
    {"train.en.gz", NULL, 8 * MiB},
    {"train.de.gz", NULL, 8 * MiB},
    {"val.en.gz", NULL, 8 * MiB},
    {"val.de.gz", NULL, 8 * MiB},
    {"test_2016_flickr.en.gz", NULL, 8 * MiB},
    {"test_2016_flickr.de.gz", NULL, 8 * MiB},
    {"test_2017_flickr.en.gz", NULL, 8 * MiB},
    {"test_2017_flickr.de.gz", NULL, 8 * MiB},
};

/* ---- WMT14 English-German, the RMS paper's RNNSearch data (docs/papers.md#mt-data)
 * --------------- The 4.5M-pair WMT14 training set as Stanford's NMT group distributes it (Europarl
 * v7, Common Crawl and News Commentary v9, Moses-tokenized), with newstest2013 (development) and
 * newstest2014 (test). No checksum or size is published: trust on first use. The RMS authors'
 * own preprocessed copy (data.statmt.org/bzhang/neurips19_rmsnorm/) lists no file names that
 * could be verified offline (docs/papers.md#mt-data), and newstest2017 is not in this copy: BLEU
 * on it needs SacreBLEU's detokenized references (wmt17 test.tgz), not part of this entry. */
#define WMT14_URL "https://nlp.stanford.edu/projects/nmt/data/wmt14.en-de/"
static const nb_source wmt14_src[] = {
    {WMT14_URL "train.en", "wmt14-train.en", 0, NULL, NULL, NULL, NULL},
    {WMT14_URL "train.de", "wmt14-train.de", 0, NULL, NULL, NULL, NULL},
    {WMT14_URL "newstest2013.en", "wmt14-newstest2013.en", 0, NULL, NULL, NULL, NULL},
    {WMT14_URL "newstest2013.de", "wmt14-newstest2013.de", 0, NULL, NULL, NULL, NULL},
    {WMT14_URL "newstest2014.en", "wmt14-newstest2014.en", 0, NULL, NULL, NULL, NULL},
    {WMT14_URL "newstest2014.de", "wmt14-newstest2014.de", 0, NULL, NULL, NULL, NULL},
};
static const nb_member wmt14_members[] = {
    {"train.en", NULL, 2 * GiB},         {"train.de", NULL, 2 * GiB},
    {"newstest2013.en", NULL, 16 * MiB}, {"newstest2013.de", NULL, 16 * MiB},
    {"newstest2014.en", NULL, 16 * MiB}, {"newstest2014.de", NULL, 16 * MiB},
};

/* ---- Tiny Shakespeare (karpathy/char-rnn), the text of nanoGPT's shakespeare_char benchmark
 * ------------------------------------- One raw UTF-8 (in fact ASCII) text file of 1,115,394
 * bytes. The repository publishes no checksum: the SHA-256 and MD5 pinned here were computed from
 * the file as that repository serves it (master). The lm task reads it whole (datasets/text.h). */
static const nb_source tinyshakespeare_src[] = {
    {"https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
     "input.txt", 1115394, "6fb458f1232090904fb40fe944165e91",
     "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed", NULL, NULL},
};
static const nb_member tinyshakespeare_members[] = {
    {"input.txt", NULL, 4 * MiB},
};

/* ---- Binarized MNIST of Larochelle & Murray (2011), DRAW's and the LN paper's §6.4 data ------
 * The three text files at the URLs the literature uses (DRAW, IWAE, VAE code), one image a line
 * of 784 values 0/1 (datasets/amat.h), 50,000 / 10,000 / 10,000 lines. No size or checksum is
 * published: trust on first use. Each line is 1,568 bytes (784 values, 783 spaces, a newline),
 * so the files are about 78.4 and 15.7 MB; the caps leave room for trailing whitespace. */
#define BINMNIST_URL "http://www.cs.toronto.edu/~larocheh/public/datasets/binarized_mnist/"
static const nb_source binmnist_src[] = {
    {BINMNIST_URL "binarized_mnist_train.amat", "binarized_mnist_train.amat", 0, NULL, NULL, NULL,
     NULL},
    {BINMNIST_URL "binarized_mnist_valid.amat", "binarized_mnist_valid.amat", 0, NULL, NULL, NULL,
     NULL},
    {BINMNIST_URL "binarized_mnist_test.amat", "binarized_mnist_test.amat", 0, NULL, NULL, NULL,
     NULL},
};
static const nb_member binmnist_members[] = {
    {"binarized_mnist_train.amat", NULL, 96 * MiB},
    {"binarized_mnist_valid.amat", NULL, 24 * MiB},
    {"binarized_mnist_test.amat", NULL, 24 * MiB},
};

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const nb_dataset registry[] = {
    {"cifar10", "CIFAR-10, binary version (60,000 32x32 colour images)", "cifar-10 binary",
     NB_PACK_TARGZ, cifar_src, N(cifar_src), cifar_members, N(cifar_members), 1, cifar_extra},
    {"mnist", "MNIST handwritten digits (IDX, gzip)", "idx", NB_PACK_FILES, mnist_src, N(mnist_src),
     idx_members, N(idx_members), 1, NULL},
    {"fashion-mnist", "Fashion-MNIST (IDX, gzip)", "idx", NB_PACK_FILES, fashion_src,
     N(fashion_src), idx_members, N(idx_members), 1, NULL},
    {"coco-oe", "COCO captions + VGG19 10-crop features (order-embeddings coco.zip)",
     "captions text + npy", NB_PACK_ZIP, coco_src, N(coco_src), coco_members, N(coco_members), 0,
     NULL},
    {"cnn-top4", "CNN reading comprehension, top-4 sentences (top4.zip)", "pickle subset",
     NB_PACK_ZIP, top4_src, N(top4_src), top4_members, N(top4_members), 0, NULL},
    {"multi30k", "Multi30k task 1 English-German captions (raw text, gzip)", "parallel text",
     NB_PACK_FILES, m30k_src, N(m30k_src), m30k_members, N(m30k_members), 1, NULL},
    {"wmt14-en-de", "WMT14 English-German, 4.5M pairs (Stanford NMT copy, tokenized text)",
     "parallel text", NB_PACK_FILES, wmt14_src, N(wmt14_src), wmt14_members, N(wmt14_members), 1,
     NULL},
    {"binarized-mnist", "Binarized MNIST of Larochelle & Murray (3 .amat text files, 50k/10k/10k)",
     "amat text (784 values 0/1 a line)", NB_PACK_FILES, binmnist_src, N(binmnist_src),
     binmnist_members, N(binmnist_members), 1, NULL},
    {"tinyshakespeare", "Tiny Shakespeare (karpathy/char-rnn input.txt, 1.1 MB of text)",
     "utf-8 text", NB_PACK_FILES, tinyshakespeare_src, N(tinyshakespeare_src),
     tinyshakespeare_members, N(tinyshakespeare_members), 1, NULL},
};

int nb_registry_count(void) {
    return N(registry);
}

const nb_dataset *nb_registry_at(int i) {
    return i >= 0 && i < N(registry) ? &registry[i] : NULL;
}

const nb_dataset *nb_registry_find(const char *name) {
    for (int i = 0; i < N(registry); i++)
        if (strcmp(registry[i].name, name) == 0) return &registry[i];
    return NULL;
}

int64_t nb_dataset_download_size(const nb_dataset *d) {
    int64_t t = 0;
    for (int i = 0; i < d->nsources; i++) {
        if (d->sources[i].size <= 0) return 0;
        t += d->sources[i].size;
    }
    return t;
}
