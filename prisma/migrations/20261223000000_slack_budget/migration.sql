-- CreateTable
CREATE TABLE "SlackBudget" (
    "key" TEXT NOT NULL,
    "tat" TIMESTAMP(3) NOT NULL,
    "pausedUntil" TIMESTAMP(3),
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "SlackBudget_pkey" PRIMARY KEY ("key")
);

